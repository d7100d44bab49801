/* SPDX-License-Identifier: MIT */
/*
 * The web configuration file of libpcpu-exporter (pcpu_exporter_web_config(),
 * `pcpustat serve --web.config.file`): TLS and
 * basic authentication in the format of the Prometheus exporter toolkit
 * (github.com/prometheus/exporter-toolkit, docs/web-configuration.md), so
 * operators reuse the files their other exporters read.
 */
#ifndef PCPUSTAT_WEBCONFIG_H
#define PCPUSTAT_WEBCONFIG_H

#include <stddef.h>

/* tls_server_config.client_auth_type */
enum web_client_auth {
	WEB_CLIENT_NONE,              /* NoClientCert (the default) */
	WEB_CLIENT_REQUEST,           /* RequestClientCert */
	WEB_CLIENT_REQUIRE_ANY,       /* RequireAnyClientCert */
	WEB_CLIENT_VERIFY_IF_GIVEN,   /* VerifyClientCertIfGiven */
	WEB_CLIENT_REQUIRE_VERIFY,    /* RequireAndVerifyClientCert */
};

struct web_user {
	char *name, *hash; /* hash: bcrypt ($2a$, $2b$, $2y$), checked by auth.c */
};

struct web_config {
	char *cert_pem, *key_pem, *ca_pem; /* file contents; cert NULL: no TLS */
	enum web_client_auth client_auth;
	char *priorities; /* GnuTLS priority string from min/max_version */
	struct web_user *users;
	size_t nusers;
};

/* Reads and checks the file (paths in it are relative to its directory).
 * 0, or -1 with a message in err. */
int pcpu__exp_web_config_load(const char *path, struct web_config *wc, char *err, size_t cap);
void pcpu__exp_web_config_free(struct web_config *wc);

#endif /* PCPUSTAT_WEBCONFIG_H */
