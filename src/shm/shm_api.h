/*
 * shm_api.h - what another layer may ask of the shared store without
 * knowing its layout (shm.h is the store's own).  Defined in shm_segment.c.
 */
#ifndef SRL_SHM_API_H
#define SRL_SHM_API_H

#include <stdint.h>

#include "srl.h"

/* The slots a segment made from cfg has (its capacity rounded up to whole
 * buckets, as the open computes it), or 0 if cfg cannot make a segment;
 * *bucket_slots gets the slots of one bucket. */
uint64_t srl__shm_slots_for(const srl_config *cfg, uint32_t *bucket_slots);

#endif
