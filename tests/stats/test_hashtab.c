/*
 * The library's one hash table (src/stats/hashtab.c), compiled into the
 * test: every key added is found, every key removed is gone, and the
 * table's count follows, through many adds and removes in random order.
 * The hashes are made to collide on purpose (a few dozen distinct values
 * for thousands of keys, some near the table's end), so that runs are long,
 * wrap around the end of the table and are repaired by the backward shift
 * on every removal: a shift that left a key behind a hole would lose it.
 * Also the hash: sequential (base then suffix hashes as the whole name),
 * and label values separated, so ("ab", "c") and ("a", "bc") differ.
 */
#include "../check.h"
#include <string.h>

#include "hashtab.h"

enum { NKEYS = 4000, ROUNDS = 200000 };

static int key_eq(const struct pcpu__hslot *s, const void *ctx)
{
	return s->key == *(const uintptr_t *)ctx;
}

static uint64_t rnd(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

/* Few distinct hashes (under 2^32, which the table keeps as they are):
 * most at the table's last slots, so runs wrap around its end, some at its
 * first slots, where the wrapped runs meet them. */
static uint64_t colliding_hash(uintptr_t key)
{
	unsigned c = (unsigned)(key % 37);

	return c < 30 ? 0xffffffffu - c * 3 : c;
}

int main(void)
{
	static char present[NKEYS + 1];
	struct pcpu__htab t = { 0 };
	uint64_t x = 88172645463325252ull;
	size_t n = 0, r;
	uintptr_t k;
	const char *ab[] = { "ab", "c" }, *abc[] = { "a", "bc" };

	for (r = 0; r < ROUNDS; r++) {
		struct pcpu__hslot *s;

		k = 1 + (uintptr_t)(rnd(&x) % NKEYS);
		if (r & 1) {
			/* The one-probe form: finds a present key, adds another. */
			int added = -1;

			s = pcpu__htab_find_or_add(&t, colliding_hash(k), key_eq, &k, k,
						   (uint32_t)(k * 3), &added);
			CHECK(s != NULL && s->key == k && s->val == (uint32_t)(k * 3));
			CHECK(added == !present[k]);
			if (added) {
				present[k] = 1;
				n++;
			} else {
				pcpu__htab_remove(&t, s);
				present[k] = 0;
				n--;
			}
			CHECK(t.used == n);
			CHECK(t.used * 2 <= t.cap);
			continue;
		}
		s = pcpu__htab_find(&t, colliding_hash(k), key_eq, &k);
		CHECK((s != NULL) == present[k]);
		if (s) {
			CHECK(s->val == (uint32_t)(k * 3));
			pcpu__htab_remove(&t, s);
			present[k] = 0;
			n--;
		} else {
			CHECK(pcpu__htab_add(&t, colliding_hash(k), k, (uint32_t)(k * 3)) == 0);
			present[k] = 1;
			n++;
		}
		CHECK(t.used == n);
		CHECK(t.used * 2 <= t.cap);
		if (r % 10007 == 0)
			for (k = 1; k <= NKEYS; k++)
				CHECK((pcpu__htab_find_key(&t, colliding_hash(k), k) != NULL) == present[k]);
	}
	for (k = 1; k <= NKEYS; k++)
		CHECK((pcpu__htab_find(&t, colliding_hash(k), key_eq, &k) != NULL) == present[k]);
	pcpu__htab_free(&t);
	CHECK(t.cap == 0 && t.used == 0 && pcpu__htab_find_key(&t, 1, 1) == NULL);

	CHECK(pcpu__hash_str(pcpu__hash_str(PCPU__HASH_INIT, "foo"), "_total") ==
	      pcpu__hash_str(PCPU__HASH_INIT, "foo_total"));
	CHECK(pcpu__hash_bytes(PCPU__HASH_INIT, "foo_total", 9) ==
	      pcpu__hash_str(PCPU__HASH_INIT, "foo_total"));
	CHECK(pcpu__hash_values(PCPU__HASH_INIT, ab, 2) != pcpu__hash_values(PCPU__HASH_INIT, abc, 2));
	printf("test_hashtab: ok (%d adds and removes over %d colliding keys)\n", ROUNDS, NKEYS);
	return 0;
}
