/* integrations/postgresql/pcpu_stat_statements--1.0.sql */

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION pcpu_stat_statements" to load this file. \quit

-- pg_stat_statements 1.10's interface, under this extension's name.
CREATE FUNCTION pcpu_stat_statements_reset(IN userid Oid DEFAULT 0,
    IN dbid Oid DEFAULT 0,
    IN queryid bigint DEFAULT 0
)
RETURNS void
AS 'MODULE_PATHNAME', 'pcpu_stat_statements_reset_1_7'
LANGUAGE C STRICT PARALLEL SAFE;

CREATE FUNCTION pcpu_stat_statements(IN showtext boolean,
    OUT userid oid,
    OUT dbid oid,
    OUT toplevel bool,
    OUT queryid bigint,
    OUT query text,
    OUT plans int8,
    OUT total_plan_time float8,
    OUT min_plan_time float8,
    OUT max_plan_time float8,
    OUT mean_plan_time float8,
    OUT stddev_plan_time float8,
    OUT calls int8,
    OUT total_exec_time float8,
    OUT min_exec_time float8,
    OUT max_exec_time float8,
    OUT mean_exec_time float8,
    OUT stddev_exec_time float8,
    OUT rows int8,
    OUT shared_blks_hit int8,
    OUT shared_blks_read int8,
    OUT shared_blks_dirtied int8,
    OUT shared_blks_written int8,
    OUT local_blks_hit int8,
    OUT local_blks_read int8,
    OUT local_blks_dirtied int8,
    OUT local_blks_written int8,
    OUT temp_blks_read int8,
    OUT temp_blks_written int8,
    OUT blk_read_time float8,
    OUT blk_write_time float8,
    OUT temp_blk_read_time float8,
    OUT temp_blk_write_time float8,
    OUT wal_records int8,
    OUT wal_fpi int8,
    OUT wal_bytes numeric,
    OUT jit_functions int8,
    OUT jit_generation_time float8,
    OUT jit_inlining_count int8,
    OUT jit_inlining_time float8,
    OUT jit_optimization_count int8,
    OUT jit_optimization_time float8,
    OUT jit_emission_count int8,
    OUT jit_emission_time float8,
    -- Beyond pg_stat_statements: the execution times' percentiles (ms),
    -- from the statement's histogram (buckets of a factor of 2), NULL
    -- without an execution.
    OUT exec_time_p50 float8,
    OUT exec_time_p90 float8,
    OUT exec_time_p99 float8
)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'pcpu_stat_statements_1_10'
LANGUAGE C STRICT VOLATILE PARALLEL SAFE;

CREATE VIEW pcpu_stat_statements AS
  SELECT * FROM pcpu_stat_statements(true);

GRANT SELECT ON pcpu_stat_statements TO PUBLIC;

CREATE FUNCTION pcpu_stat_statements_info(
    OUT dealloc bigint,
    OUT stats_reset timestamp with time zone
)
RETURNS record
AS 'MODULE_PATHNAME'
LANGUAGE C STRICT VOLATILE PARALLEL SAFE;

CREATE VIEW pcpu_stat_statements_info AS
  SELECT * FROM pcpu_stat_statements_info();

GRANT SELECT ON pcpu_stat_statements_info TO PUBLIC;

-- Don't want this to be available to non-superusers.
REVOKE ALL ON FUNCTION pcpu_stat_statements_reset(Oid, Oid, bigint) FROM PUBLIC;
