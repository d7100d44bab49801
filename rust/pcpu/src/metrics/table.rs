//! The recorder's map from a `metrics` key to its series, read without a
//! lock: the `metrics` macros call `register_counter` (and the others) on
//! every use, so a lookup of a key that is there already is the hot path.
//!
//! The map only grows while the recorder lives (a `metrics` recorder never
//! removes a key, and pcpu series are never removed by it), which makes a
//! lock-free reader simple and cheap: an open-addressing table of pointers
//! to entries, each entry written once before its pointer is published
//! (release) and never changed or freed until the table is dropped. A
//! reader loads the table (acquire), probes from the key's hash and
//! compares; no lock, no read-modify-write, no allocation. Writers (a key
//! seen for the first time) take a mutex, look again, insert, and double
//! the table when it is half full: the new table is filled before it is
//! published, and the old one is kept until the drop (a reader may still
//! be probing it; together the old tables are smaller than the current
//! one). A reader that probes an old table may miss a newer entry; it then
//! takes the writer's path, which finds it.
//!
//! Why not a general concurrent map: those must reclaim removed entries
//! (epochs or hazard pointers: a guard or a fence per read) or take a
//! reader lock (metrics-exporter-prometheus's sharded `RwLock`, an atomic
//! read-modify-write on a line every reader shares). Nothing is removed
//! here, so nothing needs reclaiming.

use std::ptr;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::Mutex;

/// One key and its value, immutable once published.
struct Entry<K, V> {
    hash: u64,
    key: K,
    value: V,
}

/// An array of 2^bits slots, each null or an entry's pointer.
struct Slots<K, V> {
    shift: u32,
    slots: Box<[AtomicPtr<Entry<K, V>>]>,
}

impl<K, V> Slots<K, V> {
    fn new(bits: u32) -> Slots<K, V> {
        Slots { shift: 64 - bits, slots: (0..1usize << bits).map(|_| AtomicPtr::new(ptr::null_mut())).collect() }
    }

    /// The first slot to probe for `hash` (Fibonacci hashing: the top bits
    /// of the product, so that every bit of the hash counts).
    fn start(&self, hash: u64) -> usize {
        (hash.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> self.shift) as usize
    }

    fn mask(&self) -> usize {
        self.slots.len() - 1
    }

    /// Stores `e` in the first free slot of its probe sequence. Writers
    /// only (under the mutex); the release store publishes the entry.
    fn put(&self, e: *mut Entry<K, V>, hash: u64) {
        let mut i = self.start(hash);
        while !self.slots[i].load(Ordering::Relaxed).is_null() {
            i = (i + 1) & self.mask();
        }
        self.slots[i].store(e, Ordering::Release);
    }
}

/// What only writers touch.
struct Writer<K, V> {
    /// Every entry, in insertion order (for growing, and for the drop).
    entries: Vec<*mut Entry<K, V>>,
    /// The tables replaced by larger ones, freed at the drop.
    old: Vec<*mut Slots<K, V>>,
}

/// The map. `get` is lock-free; `get_or_insert_with` takes a mutex when
/// the key is absent.
pub(crate) struct Table<K, V> {
    current: AtomicPtr<Slots<K, V>>,
    writer: Mutex<Writer<K, V>>,
}

// SAFETY: the raw pointers are owned by the table (freed only in Drop);
// entries are immutable once shared, and handed out as `&V` to any
// thread, hence the bounds.
unsafe impl<K: Send + Sync, V: Send + Sync> Send for Table<K, V> {}
unsafe impl<K: Send + Sync, V: Send + Sync> Sync for Table<K, V> {}

/// Slots of a new table: 2^6.
const INITIAL_BITS: u32 = 6;

impl<K, V> Table<K, V> {
    pub(crate) fn new() -> Table<K, V> {
        Table {
            current: AtomicPtr::new(Box::into_raw(Box::new(Slots::new(INITIAL_BITS)))),
            writer: Mutex::new(Writer { entries: Vec::new(), old: Vec::new() }),
        }
    }

    /// The value of the key that has `hash` and satisfies `eq`, if it is
    /// in the table (or, during a concurrent insert, may miss it). No lock,
    /// no read-modify-write, no allocation.
    #[inline]
    pub(crate) fn get(&self, hash: u64, eq: impl Fn(&K) -> bool) -> Option<&V> {
        // SAFETY: tables and entries live until self is dropped, and the
        // acquire loads see them fully written (published by release).
        unsafe {
            let t = &*self.current.load(Ordering::Acquire);
            let mut i = t.start(hash);
            loop {
                let e = t.slots[i].load(Ordering::Acquire);
                if e.is_null() {
                    return None;
                }
                let e = &*e;
                if e.hash == hash && eq(&e.key) {
                    return Some(&e.value);
                }
                i = (i + 1) & t.mask();
            }
        }
    }

    /// The value of the key, or `make()`'s, inserted: `make` runs at most
    /// once, under the writers' mutex, only when the key is absent; if it
    /// returns `None` nothing is inserted and neither is returned.
    pub(crate) fn get_or_try_insert_with(
        &self,
        hash: u64,
        eq: impl Fn(&K) -> bool,
        make: impl FnOnce() -> Option<(K, V)>,
    ) -> Option<&V> {
        if let Some(v) = self.get(hash, &eq) {
            return Some(v);
        }
        // A panic in `make` leaves the table as it was: nothing is changed
        // before make returns, so a poisoned lock is still consistent.
        let mut w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(v) = self.get(hash, &eq) {
            return Some(v);
        }
        let (key, value) = make()?;
        let e = Box::into_raw(Box::new(Entry { hash, key, value }));
        w.entries.push(e);
        // SAFETY: the current table is ours to write under the mutex.
        let t = unsafe { &*self.current.load(Ordering::Relaxed) };
        if w.entries.len() * 2 > t.slots.len() {
            // Half full: a larger table, filled before it is published.
            let bits = 64 - t.shift + 1;
            let bigger = Slots::new(bits);
            for &old in &w.entries {
                // SAFETY: entries are live until the drop.
                bigger.put(old, unsafe { (*old).hash });
            }
            let prev = self.current.swap(Box::into_raw(Box::new(bigger)), Ordering::AcqRel);
            w.old.push(prev);
        } else {
            t.put(e, hash);
        }
        // SAFETY: just published; lives until the drop.
        Some(unsafe { &(*e).value })
    }

    /// Number of entries. Takes the writers' mutex.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.writer.lock().unwrap_or_else(|e| e.into_inner()).entries.len()
    }
}

impl<K, V> Drop for Table<K, V> {
    fn drop(&mut self) {
        let w = self.writer.get_mut().unwrap_or_else(|e| e.into_inner());
        // SAFETY: `&mut self`: no reader is left; each pointer came from
        // Box::into_raw and is freed once.
        unsafe {
            for &e in &w.entries {
                drop(Box::from_raw(e));
            }
            for &t in &w.old {
                drop(Box::from_raw(t));
            }
            drop(Box::from_raw(*self.current.get_mut()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Table;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A weak hash (many collisions) exercises probing and growth.
    fn hash(k: u64) -> u64 {
        k % 7
    }

    #[test]
    fn insert_find_grow() {
        let t: Table<u64, String> = Table::new();
        let n = if cfg!(miri) { 100 } else { 5000 };
        for k in 0..n {
            let v = t.get_or_try_insert_with(hash(k), |&x| x == k, || Some((k, k.to_string()))).unwrap();
            assert_eq!(v, &k.to_string());
        }
        for k in 0..n {
            assert_eq!(t.get(hash(k), |&x| x == k), Some(&k.to_string()));
        }
        assert_eq!(t.get(hash(n), |&x| x == n), None);
        assert_eq!(t.len(), n as usize);
        // A refused insert leaves nothing.
        assert!(t.get_or_try_insert_with(hash(n), |&x| x == n, || None).is_none());
        assert_eq!(t.len(), n as usize);
    }

    /// Threads insert overlapping keys and read them back while the table
    /// grows under them: every key is made exactly once, and every reader
    /// finds what was inserted (Miri checks the orderings).
    #[test]
    fn concurrent_once() {
        let t: Table<u64, u64> = Table::new();
        let made = AtomicUsize::new(0);
        let (threads, keys) = if cfg!(miri) { (3, 60u64) } else { (4, 20_000u64) };
        let start = std::sync::Barrier::new(threads);
        std::thread::scope(|s| {
            for _ in 0..threads {
                let (t, made, start) = (&t, &made, &start);
                s.spawn(move || {
                    start.wait();
                    // Every thread walks the keys in the same order, so
                    // they race for each absent key.
                    for k in 0..keys {
                        let v = t.get_or_try_insert_with(
                            k.wrapping_mul(0x2545_F491_4F6C_DD1D),
                            |&x| x == k,
                            || {
                                made.fetch_add(1, Ordering::Relaxed);
                                // Let the others miss the key meanwhile.
                                std::thread::yield_now();
                                Some((k, k * 3))
                            },
                        );
                        assert_eq!(v, Some(&(k * 3)));
                        let again = t.get(k.wrapping_mul(0x2545_F491_4F6C_DD1D), |&x| x == k);
                        assert_eq!(again, Some(&(k * 3)));
                    }
                });
            }
        });
        assert_eq!(made.load(Ordering::Relaxed), keys as usize);
        assert_eq!(t.len(), keys as usize);
    }
}
