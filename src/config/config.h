/*
 * config.h - what the configuration layer (config.c) shares with the
 * policy parser (policy.c), internal: the quoting of text into messages and
 * the edit distance behind every did-you-mean.
 */
#ifndef SRL_CONFIG_H
#define SRL_CONFIG_H

#include <stdarg.h>
#include <stddef.h>

#include "srl.h"

/* Longest part of a text quoted into a message; longer parts end in "...". */
#define SRL__QUOTE_MAX 32u

/* s[0..n) into buf, every byte outside printable ASCII (and ' and \) as
 * \xNN, cut at SRL__QUOTE_MAX bytes; buf of 4 * SRL__QUOTE_MAX + 8 suffices. */
void srl__quote(char *buf, size_t len, const char *s, size_t n);

/* Write a refusal into *e: the span [off, off+len) and the formatted message. */
void srl__perr_vset(srl_policy_error *e, size_t off, size_t len, const char *fmt, va_list ap);

/* Levenshtein distance of a[0..n) (case-folded) and b, for n <= 64. */
unsigned srl__edit_distance(const char *a, size_t n, const char *b);

/* 1 if some tier of c (0 included) has a gcra limit. */
int srl__config_has_gcra(const srl_config *c);

/* 1 with *out the config's fallback=POLICY (srl_open_tiered's host policy
 * while Redis does not answer), 0 when not given or when c->tiers is a
 * caller's own tier table (no config store: nothing read past it). */
int srl__config_fallback(const srl_config *c, srl_limits *out);

#endif
