/*
 * shm_testutil.h - segment helpers shared by the suites (shm_testutil.c).
 *
 * shm_poke*: write bytes at an offset of the segment named name (as given
 * to srl_open_shared), through its file, to damage it on purpose; fails
 * the test if the segment cannot be opened or written.
 *
 * Check's fork mode ends a failing test with _exit, so a test that fails
 * between creating a segment and unlinking it leaves the segment behind.
 * Each suite's main() calls shm_sweep_leftovers() after the run: it unlinks
 * /dev/shm/srl-test-<pid>-<n>-<tag> for the suite's own tags whose <pid>
 * (the test process that created it, see unique_name) no longer exists, so
 * a concurrently running suite's segments are never touched.
 */
#ifndef SRL_SHM_TESTUTIL_H
#define SRL_SHM_TESTUTIL_H

#include <stddef.h>
#include <stdint.h>

void shm_poke(const char *name, size_t off, const void *bytes, size_t n);
void shm_poke32(const char *name, size_t off, uint32_t v);
void shm_poke64(const char *name, size_t off, uint64_t v);
void shm_sweep_leftovers(const char *const *tags, size_t ntags);

#endif
