/*
 * serve.h - one policy connection: requests in, answers out, until the peer
 * closes or sends something that ends the conversation.
 */
#ifndef SRL_POLICYD_SERVE_H
#define SRL_POLICYD_SERVE_H

#include "conf.h"

/* Serve requests read from in, answers written to out; peer names the
 * client in log lines.  Returns the number of requests answered; a bad
 * request is answered with default_action and ends the connection. */
long pd_serve(pd_conf *c, int in, int out, const char *peer);

#endif
