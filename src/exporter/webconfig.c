/* SPDX-License-Identifier: MIT */
/*
 * Reading the exporter toolkit's web configuration (webconfig.h) with
 * libyaml. Passwords are checked by auth.c.
 *
 *   tls_server_config:
 *     cert_file: server.crt        # relative to this file's directory
 *     key_file: server.key
 *     client_auth_type: RequireAndVerifyClientCert   # default NoClientCert
 *     client_ca_file: ca.crt
 *     min_version: TLS12           # TLS10..TLS13, default TLS12
 *     max_version: TLS13
 *   basic_auth_users:
 *     prometheus: $2y$10$...       # htpasswd -nBC 10 "" | tr -d ':\n'
 *
 * Settings the exporter cannot honour (cipher_suites, curve_preferences,
 * http_server_config.headers, unknown keys) are refused, not ignored, as the
 * toolkit refuses unknown keys: a security setting silently dropped would be
 * worse than a daemon that does not start.
 */
#include <crypt.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "webconfig.h"

#define FILE_MAX (1 << 20)

struct ctx {
	yaml_document_t *doc;
	const char *dir; /* of the configuration file, with a trailing '/' or "" */
	char *err;
	size_t cap;
};

static int bad(struct ctx *c, const char *what, const char *detail)
{
	snprintf(c->err, c->cap, "%s%s%s", what, detail ? ": " : "", detail ? detail : "");
	return -1;
}

static const char *scalar(yaml_document_t *doc, yaml_node_t *n)
{
	(void)doc;
	return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

/* Reads a whole (PEM) file named relative to the configuration's directory. */
static int read_file(struct ctx *c, const char *name, char **out)
{
	char path[4096];
	FILE *f;
	size_t n;
	char *buf;

	if (!name || !*name)
		return bad(c, "empty file name", NULL);
	snprintf(path, sizeof path, "%s%s", name[0] == '/' ? "" : c->dir, name);
	f = fopen(path, "re");
	if (!f)
		return bad(c, path, strerror(errno));
	buf = malloc(FILE_MAX + 1);
	if (!buf) {
		fclose(f);
		return bad(c, "out of memory", NULL);
	}
	n = fread(buf, 1, FILE_MAX + 1, f);
	fclose(f);
	if (n == 0 || n > FILE_MAX) {
		free(buf);
		return bad(c, path, n ? "larger than 1 MiB" : "empty");
	}
	buf[n] = '\0';
	free(*out);
	*out = buf;
	return 0;
}

static int tls_version(const char *v)
{
	static const char *const names[] = { "TLS10", "TLS11", "TLS12", "TLS13" };
	int i;

	for (i = 0; v && i < 4; i++)
		if (strcmp(v, names[i]) == 0)
			return i;
	return -1;
}

static int client_auth(const char *v, enum web_client_auth *out)
{
	static const struct {
		const char *name;
		enum web_client_auth a;
	} t[] = {
		{ "NoClientCert", WEB_CLIENT_NONE },
		{ "RequestClientCert", WEB_CLIENT_REQUEST },
		{ "RequireAnyClientCert", WEB_CLIENT_REQUIRE_ANY },
		{ "VerifyClientCertIfGiven", WEB_CLIENT_VERIFY_IF_GIVEN },
		{ "RequireAndVerifyClientCert", WEB_CLIENT_REQUIRE_VERIFY },
	};
	size_t i;

	for (i = 0; v && i < sizeof t / sizeof t[0]; i++)
		if (strcmp(v, t[i].name) == 0) {
			*out = t[i].a;
			return 0;
		}
	return -1;
}

static int load_tls(struct ctx *c, yaml_node_t *map, struct web_config *wc)
{
	yaml_node_pair_t *p;
	int minv = 2, maxv = 3, i;
	char prio[128];

	if (map->type != YAML_MAPPING_NODE)
		return bad(c, "tls_server_config", "not a mapping");
	for (p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
		const char *k = scalar(c->doc, yaml_document_get_node(c->doc, p->key));
		const char *v = scalar(c->doc, yaml_document_get_node(c->doc, p->value));

		if (!k)
			return bad(c, "tls_server_config", "a key is not a string");
		if (strcmp(k, "cert_file") == 0) {
			if (read_file(c, v, &wc->cert_pem) < 0)
				return -1;
		} else if (strcmp(k, "key_file") == 0) {
			if (read_file(c, v, &wc->key_pem) < 0)
				return -1;
		} else if (strcmp(k, "client_ca_file") == 0) {
			if (read_file(c, v, &wc->ca_pem) < 0)
				return -1;
		} else if (strcmp(k, "client_auth_type") == 0) {
			if (client_auth(v, &wc->client_auth) < 0)
				return bad(c, "tls_server_config.client_auth_type: unknown value", v);
		} else if (strcmp(k, "min_version") == 0) {
			if ((minv = tls_version(v)) < 0)
				return bad(c, "tls_server_config.min_version: not TLS10..TLS13", v);
		} else if (strcmp(k, "max_version") == 0) {
			if ((maxv = tls_version(v)) < 0)
				return bad(c, "tls_server_config.max_version: not TLS10..TLS13", v);
		} else {
			return bad(c, "tls_server_config: setting not supported", k);
		}
	}
	if (!wc->cert_pem || !wc->key_pem)
		return bad(c, "tls_server_config", "cert_file and key_file are both required");
	/* libmicrohttpd asks clients for a certificate only when it has CAs
	 * to name (MHD_OPTION_HTTPS_MEM_TRUST), so every mode but
	 * NoClientCert needs client_ca_file here (Go's RequestClientCert and
	 * RequireAnyClientCert do not). */
	if (wc->client_auth != WEB_CLIENT_NONE && !wc->ca_pem)
		return bad(c, "tls_server_config", "client_auth_type other than NoClientCert needs client_ca_file");
	if (minv > maxv)
		return bad(c, "tls_server_config", "min_version is above max_version");
	/* GnuTLS names the versions TLS1.0..TLS1.3: remove those outside. */
	snprintf(prio, sizeof prio, "NORMAL");
	for (i = 0; i < 4; i++)
		if (i < minv || i > maxv)
			snprintf(prio + strlen(prio), sizeof prio - strlen(prio), ":-VERS-TLS1.%d", i);
	wc->priorities = strdup(prio);
	return wc->priorities ? 0 : bad(c, "out of memory", NULL);
}

static int load_users(struct ctx *c, yaml_node_t *map, struct web_config *wc)
{
	yaml_node_pair_t *p;
	size_t n;

	if (map->type != YAML_MAPPING_NODE)
		return bad(c, "basic_auth_users", "not a mapping");
	n = (size_t)(map->data.mapping.pairs.top - map->data.mapping.pairs.start);
	wc->users = calloc(n ? n : 1, sizeof *wc->users);
	if (!wc->users)
		return bad(c, "out of memory", NULL);
	for (p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
		const char *k = scalar(c->doc, yaml_document_get_node(c->doc, p->key));
		const char *v = scalar(c->doc, yaml_document_get_node(c->doc, p->value));
		struct web_user *u = &wc->users[wc->nusers];

		if (!k || !*k || !v)
			return bad(c, "basic_auth_users", "entries are user: bcrypt-hash");
		/* Only bcrypt, as the toolkit: a weak legacy hash would pass
		 * crypt_checksalt() with a warning we could not act on. */
		if (strncmp(v, "$2", 2) != 0 || crypt_checksalt(v) != CRYPT_SALT_OK)
			return bad(c, "basic_auth_users: not a bcrypt hash for user", k);
		u->name = strdup(k);
		u->hash = strdup(v);
		wc->nusers++;
		if (!u->name || !u->hash)
			return bad(c, "out of memory", NULL);
	}
	return 0;
}

int pcpu__exp_web_config_load(const char *path, struct web_config *wc, char *err, size_t cap)
{
	yaml_parser_t parser;
	yaml_document_t doc;
	yaml_node_t *root;
	yaml_node_pair_t *p;
	struct ctx c = { &doc, "", err, cap };
	char dir[4096];
	const char *slash = strrchr(path, '/');
	FILE *f;
	int rc = 0;

	memset(wc, 0, sizeof *wc);
	if (slash) {
		snprintf(dir, sizeof dir, "%.*s/", (int)(slash - path), path);
		c.dir = dir;
	}
	f = fopen(path, "re");
	if (!f)
		return bad(&c, strerror(errno), NULL);
	if (!yaml_parser_initialize(&parser)) {
		fclose(f);
		return bad(&c, "out of memory", NULL);
	}
	yaml_parser_set_input_file(&parser, f);
	if (!yaml_parser_load(&parser, &doc)) {
		snprintf(err, cap, "line %lu: %s", (unsigned long)parser.problem_mark.line + 1,
			 parser.problem ? parser.problem : "invalid YAML");
		yaml_parser_delete(&parser);
		fclose(f);
		return -1;
	}
	root = yaml_document_get_root_node(&doc);
	if (root && root->type != YAML_MAPPING_NODE)
		rc = bad(&c, "not a mapping of settings", NULL);
	for (p = root && !rc ? root->data.mapping.pairs.start : NULL; p && p < root->data.mapping.pairs.top; p++) {
		const char *k = scalar(&doc, yaml_document_get_node(&doc, p->key));
		yaml_node_t *v = yaml_document_get_node(&doc, p->value);

		if (k && strcmp(k, "tls_server_config") == 0)
			rc = load_tls(&c, v, wc);
		else if (k && strcmp(k, "basic_auth_users") == 0)
			rc = load_users(&c, v, wc);
		else
			rc = bad(&c, "setting not supported", k ? k : "(not a string)");
		if (rc < 0)
			break;
	}
	yaml_document_delete(&doc);
	yaml_parser_delete(&parser);
	fclose(f);
	if (rc < 0)
		pcpu__exp_web_config_free(wc);
	return rc;
}

static void free_secret(char *s)
{
	if (s) {
		explicit_bzero(s, strlen(s));
		free(s);
	}
}

void pcpu__exp_web_config_free(struct web_config *wc)
{
	size_t i;

	free(wc->cert_pem);
	free_secret(wc->key_pem);
	free(wc->ca_pem);
	free(wc->priorities);
	for (i = 0; i < wc->nusers; i++) {
		free(wc->users[i].name);
		free(wc->users[i].hash);
	}
	free(wc->users);
	memset(wc, 0, sizeof *wc);
}
