/* hash.h - SipHash-1-3 keyed hashing of keys (hash flooding resistance, as Redis does). */
#ifndef RLIMITD_HASH_H
#define RLIMITD_HASH_H

#include <stddef.h>
#include <stdint.h>

uint64_t hash_siphash13(const void *data, size_t len, const uint8_t seed[16]);

#endif
