/*
 * The rate check never admits more than its limit in one period, even when
 * a period's reset overlaps a call: checked by resetting inside a call,
 * between its add and its fetch.
 *
 * pcpu_counter9_ratecheck_fields() calls the library's test hook
 * pcpu__test_ratecheck_counted(lock, ticks), when set, after counting the
 * event and before fetching the count. There the hook plays a second
 * thread: it makes the period look ended and checks once more, which resets
 * (the ended period's count, our event included, goes to that call's
 * return) -- or, in the second case, holds the reset's lock with the count
 * already zeroed, as a resetter stopped between its zeroing and its new
 * period. Without the check after the fetch, the interrupted call reads the
 * new, small count and admits its event: limit + 1 admissions in the period
 * that counted it. CI met this once in counter9_rate (201 admitted, limit
 * 200) with a fetch that walked the slots before a reset and read the
 * zeroing's offset after it.
 *
 * Links the static library: the hook is a hidden symbol of src/core/counter9.c.
 */
#include "check.h"
#include <pcpu/pcpu.h>
#include <pcpu/counter9.h>

extern void (*pcpu__test_ratecheck_counted)(volatile int *lock, int *ticks);

enum { LIMIT = 3 };

static struct pcpu_counter9_rate cr;
static int64_t inner_result;

/* Another thread's call at the period's end, run inside ours. */
static void reset_inside(volatile int *lock, int *ticks)
{
	pcpu__test_ratecheck_counted = NULL;
	CHECK(lock == &cr.cr_lock && ticks == &cr.cr_ticks);
	__atomic_store_n(ticks, __atomic_load_n(ticks, __ATOMIC_RELAXED) - (cr.cr_period + 1) * PCPU_COUNTER9_HZ,
			 __ATOMIC_RELAXED);
	inner_result = pcpu_counter9_ratecheck(&cr, LIMIT);
}

/* A resetter stopped after its zeroing, before it opens the new period. */
static void zeroed_under_lock(volatile int *lock, int *ticks)
{
	pcpu__test_ratecheck_counted = NULL;
	(void)ticks;
	__atomic_store_n((int *)lock, 1, __ATOMIC_RELAXED);
	inner_result = (int64_t)pcpu_counter_fetch_and_zero(cr.cr_rate);
}

static void fill_period(void)
{
	CHECK(cr.cr_rate = pcpu_counter_alloc());
	cr.cr_lock = 0;
	cr.cr_ticks = 0;
	cr.cr_over = 0;
	cr.cr_period = 60; /* no real period ends during the test */
	for (int i = 0; i < LIMIT; i++)
		CHECK(pcpu_counter9_ratecheck(&cr, LIMIT) == 0);
	/* The period opened a second ago: the reset's new one starts at
	 * another tick, as real periods (>= 1 s apart) always do. */
	cr.cr_ticks -= PCPU_COUNTER9_HZ;
}

int main(void)
{
	int64_t r;

	/* A whole reset between the add and the fetch. */
	fill_period();
	pcpu__test_ratecheck_counted = reset_inside;
	r = pcpu_counter9_ratecheck(&cr, LIMIT);
	CHECK(pcpu__test_ratecheck_counted == NULL); /* the hook ran */
	/* The reset reported the ended period: the limit's events and ours. */
	CHECK(inner_result == LIMIT + 1);
	if (r == 0)
		fprintf(stderr, "a call the reset overlapped was admitted: %d admissions in a period limited to %d\n",
			LIMIT + 1, LIMIT);
	CHECK(r == -1);
	/* The new period goes on as usual: the reset's call and LIMIT - 1 more. */
	for (int i = 1; i < LIMIT; i++)
		CHECK(pcpu_counter9_ratecheck(&cr, LIMIT) == 0);
	CHECK(pcpu_counter9_ratecheck(&cr, LIMIT) == -1);
	pcpu_counter_free(cr.cr_rate);

	/* A reset still under way (zeroed, lock held) when the fetch reads. */
	fill_period();
	pcpu__test_ratecheck_counted = zeroed_under_lock;
	r = pcpu_counter9_ratecheck(&cr, LIMIT);
	CHECK(pcpu__test_ratecheck_counted == NULL);
	CHECK(inner_result == LIMIT + 1);
	if (r == 0)
		fprintf(stderr, "a call that read a reset's zeroed count was admitted: %d admissions in a period limited to %d\n",
			LIMIT + 1, LIMIT);
	CHECK(r == -1);
	cr.cr_lock = 0;
	pcpu_counter_free(cr.cr_rate);
	puts("ratecheck_race: a reset inside a call, finished or under way, never admits it");
	return 0;
}
