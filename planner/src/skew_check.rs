//! `auto`'s skew check: a tally of both inputs' keys, and from it the load Shuffle-Join's
//! busiest worker would carry beyond the mean, which decides between Shuffle-Join and AM-Join.
//!
//! Inputs of up to [`SAMPLE_ROWS`] rows are counted exactly. Larger ones are counted from a
//! sample: one row in `2^s` of each side, chosen by hashes of its block of 64 rows' number, so
//! that about [`SAMPLE_ROWS`] rows are counted, and only those rows' keys are hashed. Where a
//! key has [`EXACT_SAMPLES`] or more sampled rows on either side (the keys that can unbalance a
//! worker), or the sample alone finds a hot key, the check needs an [`ExactPass`] over every row
//! again, which counts those keys on both sides and every worker's input exactly; then only the
//! pairs of keys with fewer sampled rows on both sides are estimated, from the sample, and a hot
//! key among those set aside has its share and the predicted excess counted exactly. Where no key
//! is that common and none is hot (uniform keys, a foreign key into a primary key whose values
//! each have fewer than about `64 << s` rows), no row is read twice and there is no skew.
//!
//! What sampling saves is counting every row's key in a table: on a uniform 10M x 10M pair,
//! 0.12 s of merging and counting and 0.06 s of bucketing on two threads. Hashing only the
//! sampled rows saves keeping every row's hash for the exact pass: on that pair the check took
//! 0.21 s with them kept, of which writing and reading back 160 MB of hashes was a third.
//!
//! Input records and output pairs are not worth the same: [`WorkCosts`] weighs them (and
//! AM-Join's key count) as measured on one process and on a cluster, with the output counted or
//! written.
//!
//! ```
//! use skewjoin_operators::Side;
//! use skewjoin_planner::skew_check::KeyTally;
//! use skewjoin_planner::work_costs::WorkCosts;
//!
//! // Key 7 on 2,000 of 12,000 rows on both sides: its pairs are most of the output.
//! let keys: Vec<u64> = (0..10_000).chain(std::iter::repeat(7).take(2_000)).collect();
//! let mut tally = KeyTally::for_join(24_000, 12_000);
//! keys.iter().for_each(|key| tally.add(Side::Left, key));
//! keys.iter().for_each(|key| tally.add(Side::Right, key));
//! let skew = tally.skew(4, 2, WorkCosts::THREADS).expect("key 7 is hot");
//! assert!(skew.is_of(&7u64));
//! assert!(skew.am_pays());
//! ```

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use skewjoin_operators::hash::mix64;
use skewjoin_operators::{JoinKey, Partitioning, Side};

use crate::work_costs::WorkCosts;

/// A hot key described for `auto`'s reason, and whether AM-Join is worth its key count.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SkewFinding {
    /// Whether to run AM-Join rather than Shuffle-Join ([`Skew::am_pays`]).
    pub am_pays: bool,
    /// Why, naming the key and the predicted loads.
    pub reason: String,
}

/// Buckets of a [`KeyTally`], by the top byte of a key's hash.
const TALLY_BUCKETS: usize = 256;

/// Rows of both inputs up to which every row is counted, and about how many are counted from
/// larger inputs.
pub const SAMPLE_ROWS: u64 = 1 << 21;

/// Sampled rows on either side from which a key is counted exactly: with one row in 16 sampled,
/// keys of about 1,000 rows or more. The keys below have at most a few thousand pairs each.
pub const EXACT_SAMPLES: u64 = 64;

/// Salts of the two sides' row samples, so that they are drawn independently.
const SAMPLE_SALT: [u64; 2] = [0x5eed_1ef7_0000_0001, 0x5eed_7167_0000_0002];

/// Which of rows `64 block` to `64 block + 63` of side `index` a tally sampling one row in
/// `2^shift` counts: bit `i` for row `64 block + i`, each set with a chance of `2^-shift`,
/// independently (the AND of `shift` hashes of the block number).
#[inline]
fn sample_mask(block: u64, index: usize, shift: u32) -> u64 {
    (0..u64::from(shift)).fold(u64::MAX, |mask, word| {
        mask & mix64((block << 6 | word) ^ SAMPLE_SALT[index])
    })
}

/// The sampling shift for inputs of `rows` rows in all: 0 (every row) up to [`SAMPLE_ROWS`],
/// else the least `s` that leaves at most [`SAMPLE_ROWS`] rows in `2^s` sampled.
pub fn sample_shift(rows: u64) -> u32 {
    let mut shift = 0;
    while rows >> shift > SAMPLE_ROWS {
        shift += 1;
    }
    shift
}

/// What `auto`'s skew check found on these keys for `partitions` partitions on `workers`
/// workers, work weighed by `costs` (see [`KeyTally::skew`]): `None` when no key is hot enough
/// to look at, else the hottest key's [`Skew`] described, and whether AM-Join pays.
pub fn skew_reason<K: JoinKey>(
    left: &[K],
    right: &[K],
    partitions: usize,
    workers: usize,
    costs: WorkCosts,
) -> Option<SkewFinding> {
    let skew = skew_of(left, right, partitions, workers, costs)?;
    let key = left.iter().chain(right).find(|key| skew.is_of(*key))?;
    Some(skew.finding(key))
}

/// The skew check of a join of these keys ([`KeyTally::skew`]), sampled as a join of their size
/// is ([`KeyTally::for_join`]), with the [`ExactPass`] it asks for.
pub fn skew_of<K: JoinKey>(
    left: &[K],
    right: &[K],
    partitions: usize,
    workers: usize,
    costs: WorkCosts,
) -> Option<Skew> {
    let rows = (left.len() + right.len()) as u64;
    let mut tally = KeyTally::for_join(rows, rows);
    tally.add_all(Side::Left, left);
    tally.add_all(Side::Right, right);
    let counts = tally.counts(partitions, workers, costs, 1);
    let exact = counts.exact_pass().map(|mut pass| {
        left.iter().for_each(|key| pass.add(Side::Left, key));
        right.iter().for_each(|key| pass.add(Side::Right, key));
        pass
    });
    counts.skew(exact.as_ref())
}

/// Key counts of both inputs, gathered a key at a time (so a streamed input need not be held),
/// for `auto`'s skew check: exact, or from a sample of rows, and with the [`ExactPass`] that
/// [`TallyCounts::exact_pass`] asks for, exact for every key that matters (see the module's
/// documentation).
///
/// Keys are counted by their stable hash (two keys whose 63 high hash bits agree count as one,
/// which can only overstate skew). The counted hashes wait in buckets by their top byte, and each
/// bucket is counted on its own: a map of one bucket's keys stays in the caches, where one map of
/// every key would miss them on nearly every row (2 x 10^7 uniform keys: about 5 s against well
/// under one).
#[derive(Debug)]
pub struct KeyTally {
    /// Each counted key's hash, its lowest bit replaced by its side (0 left, 1 right).
    buckets: Vec<Vec<u64>>,
    /// The buckets of tallies merged into this one, kept as they were: merging moves them, it
    /// does not copy their hashes (80 MB for 10^7 rows, 0.05 to 0.07 s).
    merged: Vec<Vec<Vec<u64>>>,
    /// Rows of each side, NULL keys included.
    rows: [u64; 2],
    /// What turns a side's row count into the number of the next row in the side, which
    /// chooses the sample ([`continue_at`](KeyTally::continue_at)); wraps.
    row_offsets: [u64; 2],
    /// One row in `2^shift` is counted in the buckets; 0 counts every row.
    shift: u32,
}

impl Default for KeyTally {
    /// An exact tally.
    fn default() -> Self {
        KeyTally {
            buckets: vec![Vec::new(); TALLY_BUCKETS],
            merged: Vec::new(),
            rows: [0; 2],
            row_offsets: [0; 2],
            shift: 0,
        }
    }
}

/// A key whose hash partition Shuffle-Join would overload, found by [`KeyTally::skew`], with
/// what Shuffle-Join's busiest worker would do beyond the mean.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Skew {
    /// The key's hash, its lowest bit cleared.
    hash: u64,
    /// How many fair shares of `what` the key alone is.
    pub share: f64,
    /// `"output"`, `"left input"` or `"right input"`.
    pub what: &'static str,
    /// The work Shuffle-Join's busiest worker would do beyond the mean of all workers (the
    /// input records it receives and the inner-join pairs it produces, over the partitions it
    /// hosts, weighed by `costs`), in input records: what AM-Join could save it, and so the run.
    pub excess: u64,
    /// What AM-Join's key count costs each worker, in the same records: a share of its fair
    /// share of the input (`costs`), as the count reads every key once more and sends every
    /// worker's distinct keys to their owners.
    pub count_cost: u64,
    /// How the work was weighed.
    pub costs: WorkCosts,
}

impl Skew {
    /// Whether `key` is the skewed key.
    pub fn is_of<K: JoinKey>(&self, key: &K) -> bool {
        !key.is_null() && key.stable_hash() & !1 == self.hash
    }

    /// Whether AM-Join's balance is worth its key count: the busiest worker of a Shuffle-Join
    /// would do more beyond the mean than the count costs each worker. Workers, not partitions:
    /// a worker hosting a hot partition also hosts others, and the run lasts as long as its
    /// busiest worker.
    ///
    /// Measured on left Zipf 1.2 x right uniform, 10^7 x 10^7 at W = 2: the hottest key is 0.7
    /// fair shares of the output, yet a Shuffle-Join is only 1.10 / 1.24 (input / output,
    /// max/mean) out of balance and takes 2.5 s, while AM-Join, balanced, takes 4.6 s. On
    /// same-rank Zipf 0.8, 5M x 5M on two emulated machines, Shuffle-Join's busiest worker
    /// makes 1.1 x 10^9 pairs beyond the mean, which weighed like records would pay for the
    /// count 200 times over; counted, they cost less than it, and Shuffle-Join finishes first
    /// (3.8 s against 4.7).
    pub fn am_pays(&self) -> bool {
        self.excess > self.count_cost
    }

    /// The finding, naming `key`.
    pub fn finding<K: std::fmt::Debug>(&self, key: &K) -> SkewFinding {
        let hot = format!("key {key:?} alone is {}", self.described());
        let am_pays = self.am_pays();
        let reason = if am_pays {
            format!("{hot}: {}", self.verdict())
        } else {
            format!("{hot}, but {}", self.verdict())
        };
        SkewFinding { am_pays, reason }
    }

    /// "about 3.2 fair shares of the output".
    pub fn described(&self) -> String {
        format!("{:.1} fair shares of the {}", self.share, self.what)
    }

    /// Why AM-Join pays or not, in records of work.
    pub fn verdict(&self) -> String {
        let (than, count) = if self.am_pays() {
            ("more", "costs it")
        } else {
            ("less", "would cost it")
        };
        format!(
            "Shuffle-Join's busiest worker would do the work of {} input records beyond the \
             mean (an output pair weighed as {}{}), {than} than AM-Join's key count{} {count} \
             ({})",
            self.excess,
            self.costs.pair_weight(),
            self.costs.link_note(),
            if self.costs.crossing_per_mille > 0 {
                " and extra traffic"
            } else {
                ""
            },
            self.count_cost
        )
    }
}

impl KeyTally {
    /// An exact tally with room for about `keys` keys, so that its buckets are not regrown
    /// (each regrowth copies a bucket into fresh memory, which the kernel first zeroes). Room
    /// is only reserved: memory is touched as keys come.
    pub fn with_room_for(keys: u64) -> KeyTally {
        Self::sampled(0, keys)
    }

    /// A tally of about `tallied_rows` rows (one side, both, or parts of them) for a join of
    /// `rows` rows in all: exact up to [`SAMPLE_ROWS`] rows, sampled beyond (at
    /// [`sample_shift`]`(rows)`, which the tallies of a join share, so that they can be merged).
    pub fn for_join(rows: u64, tallied_rows: u64) -> KeyTally {
        Self::sampled(sample_shift(rows), tallied_rows)
    }

    /// A tally counting one row in `2^shift` in its buckets, with room for `rows` rows.
    pub fn sampled(shift: u32, rows: u64) -> KeyTally {
        // `sample_shift` gives at most 43; a block's hashes are numbered below 64.
        assert!(shift < 64, "a sampling shift of {shift} samples no row");
        // Hashes spread evenly over the buckets; a little over, so chance alone rarely
        // regrows one (a hot key's bucket regrows, as it would have anyway).
        let per_bucket = usize::try_from((rows >> shift) / TALLY_BUCKETS as u64)
            .unwrap_or(usize::MAX / 2)
            .saturating_mul(9)
            / 8
            + 64;
        KeyTally {
            buckets: (0..TALLY_BUCKETS)
                .map(|_| Vec::with_capacity(per_bucket))
                .collect(),
            merged: Vec::new(),
            rows: [0; 2],
            row_offsets: [0; 2],
            shift,
        }
    }

    /// Says that the next row of `side` this tally sees is row `first` of the side: the sample
    /// is chosen by row number, so tallies of parts of a side, each told where its part starts
    /// and merged, sample the rows one pass over the whole side would.
    pub fn continue_at(&mut self, side: Side, first: u64) {
        let index = side.index();
        self.row_offsets[index] = first.wrapping_sub(self.rows[index]);
    }

    /// Counts one row of `side` with key `key`. Where many rows come at once,
    /// [`add_all`](Self::add_all) counts them faster: here the sample's mask is computed for
    /// every row.
    #[inline]
    pub fn add<K: JoinKey>(&mut self, side: Side, key: &K) {
        let (index, row) = next_row(&mut self.rows, side);
        let row = row.wrapping_add(self.row_offsets[index]);
        if self.shift == 0 || sample_mask(row >> 6, index, self.shift) >> (row & 63) & 1 == 1 {
            self.push(index, key);
        }
    }

    /// Counts the next `keys.len()` rows of `side`, as [`add`](Self::add) of each would. The
    /// sample is read 64 rows at a time, as a mask whose set bits are the sampled rows: only
    /// those keys are visited. Row by row, the decision (a hash of each row number, taken one
    /// time in four or fewer) mispredicted and the call was not inlined: `add` was 30 % of the
    /// skew check's CPU on TPC-H lineitem x orders.
    pub fn add_all<K: JoinKey>(&mut self, side: Side, keys: &[K]) {
        let index = side.index();
        let first = self.rows[index].wrapping_add(self.row_offsets[index]);
        self.rows[index] += keys.len() as u64;
        if self.shift == 0 {
            keys.iter().for_each(|key| self.push(index, key));
            return;
        }
        let mut at = 0;
        while at < keys.len() {
            let row = first.wrapping_add(at as u64);
            let offset = (row & 63) as usize;
            let taken = (64 - offset).min(keys.len() - at);
            let mut mask = sample_mask(row >> 6, index, self.shift) >> offset;
            if taken < 64 {
                mask &= (1 << taken) - 1;
            }
            while mask != 0 {
                self.push(index, &keys[at + mask.trailing_zeros() as usize]);
                mask &= mask - 1;
            }
            at += taken;
        }
    }

    /// Counts a sampled row's key (NULL keys are not counted).
    #[inline(always)]
    fn push<K: JoinKey>(&mut self, index: usize, key: &K) {
        if key.is_null() {
            return;
        }
        let hash = key.stable_hash();
        self.buckets[(hash >> 56) as usize].push((hash & !1) | index as u64);
    }

    /// Adds the counts of `other`, which may have been gathered on another thread with the same
    /// sampling. Rows added after a merge are numbered for the sample as this tally's were
    /// ([`continue_at`](KeyTally::continue_at) says otherwise): merge tallies once they are
    /// complete.
    pub fn merge(&mut self, other: KeyTally) {
        assert_eq!(
            self.shift, other.shift,
            "tallies sampled at different rates cannot be merged"
        );
        self.merged.push(other.buckets);
        self.merged.extend(other.merged);
        self.rows[0] += other.rows[0];
        self.rows[1] += other.rows[1];
    }

    /// The hashes of bucket `index`: this tally's and every merged one's.
    fn bucket(&self, index: usize) -> impl Iterator<Item = &u64> {
        std::iter::once(&self.buckets[index])
            .chain(self.merged.iter().map(move |buckets| &buckets[index]))
            .flatten()
    }

    /// The key that would give its hash partition the most over half a fair share of the
    /// output (its `n_L x n_R` pairs against `OUT / P`) or of one side's input, if any, with
    /// the excess work Shuffle-Join's busiest worker (of `workers`, hosting the `partitions`
    /// partitions) would do, weighed by `costs`: `auto` runs AM-Join instead of Shuffle-Join
    /// when [`Skew::am_pays`].
    ///
    /// The loads are predicted by placing every key's hash where Shuffle-Join would: exactly
    /// for an exact tally; for a sampled one, from the sample alone (the check of a join
    /// follows [`counts`](Self::counts) with the [`ExactPass`] it asks for). NULL keys are left
    /// out: Shuffle-Join drops them or spreads them evenly, which moves the mean and the maximum
    /// alike.
    pub fn skew(&self, partitions: usize, workers: usize, costs: WorkCosts) -> Option<Skew> {
        self.skew_on_threads(partitions, workers, costs, 1)
    }

    /// [`skew`](Self::skew), counted on `threads` threads (scoped; none are spawned when
    /// `threads` is 1, as the browser, which cannot spawn them, needs).
    pub fn skew_on_threads(
        &self,
        partitions: usize,
        workers: usize,
        costs: WorkCosts,
        threads: usize,
    ) -> Option<Skew> {
        self.counts(partitions, workers, costs, threads).skew(None)
    }

    /// The keys' counts, on `threads` threads, for the skew check of `partitions` partitions on
    /// `workers` workers weighed by `costs`: its verdict ([`TallyCounts::skew`]) after the
    /// [`ExactPass`] it asks for, if any, over every row the tally saw.
    pub fn counts(
        &self,
        partitions: usize,
        workers: usize,
        costs: WorkCosts,
        threads: usize,
    ) -> TallyCounts {
        let placement = Partitioning::new(partitions.max(1), workers.max(1));
        let per_thread = TALLY_BUCKETS.div_ceil(threads.max(1));
        let runs: Vec<_> = (0..TALLY_BUCKETS)
            .step_by(per_thread)
            .map(|first| first..(first + per_thread).min(TALLY_BUCKETS))
            .collect();
        let mut counts = BucketCounts::new(placement.partitions());
        for run_counts in on_threads(runs, |run| {
            BucketCounts::of(self, run, &placement, self.shift, costs)
        }) {
            counts.add(run_counts);
        }
        TallyCounts {
            placement,
            counts,
            rows: self.rows,
            shift: self.shift,
            costs,
        }
    }
}

/// A [`KeyTally`]'s keys counted for the skew check, before the [`ExactPass`] that a sampled
/// tally may ask for.
#[derive(Debug)]
pub struct TallyCounts {
    placement: Partitioning,
    counts: BucketCounts,
    rows: [u64; 2],
    shift: u32,
    costs: WorkCosts,
}

impl TallyCounts {
    /// The pass over every row again that the check needs, if any: a sampled tally's, where a
    /// key was sampled on [`EXACT_SAMPLES`] or more rows of a side, or the sample alone finds
    /// a hot key. Give it every row the tally saw ([`ExactPass::add`]), on as many passes as
    /// wanted (each a clone of this one, [`merged`](ExactPass::merge) after), then to
    /// [`skew`](Self::skew).
    pub fn exact_pass(&self) -> Option<ExactPass> {
        if self.shift == 0 || (self.counts.set_aside.is_empty() && self.skew(None).is_none()) {
            return None;
        }
        let hashes: Vec<u64> = self
            .counts
            .set_aside
            .iter()
            .map(|(hash, _)| *hash)
            .collect();
        let mut filter = vec![0u64; FILTER_WORDS];
        for &hash in &hashes {
            let bit = filter_bit(hash);
            filter[bit / 64] |= 1 << (bit % 64);
        }
        let index = hashes
            .iter()
            .enumerate()
            .map(|(index, &hash)| (hash, index))
            .collect();
        Some(ExactPass {
            keys: Arc::new(ExactKeys { index, filter }),
            placement: self.placement,
            inputs: vec![0; self.placement.partitions()],
            rows: vec![[0; 2]; hashes.len()],
            seen: [0; 2],
        })
    }

    /// The verdict of [`KeyTally::skew`]: with `exact`, the [`ExactPass`] over every row, each
    /// worker's input and the rows of the keys it counted are exact; without, they are
    /// estimated from the sample.
    pub fn skew(&self, exact: Option<&ExactPass>) -> Option<Skew> {
        let (placement, costs) = (&self.placement, self.costs);
        let BucketCounts {
            mut output,
            mut most,
            mut loads,
            ref sampled_inputs,
            ref set_aside,
        } = self.counts.clone();
        match exact {
            Some(pass) => {
                debug_assert!(
                    self.shift > 0 && pass.rows.len() == set_aside.len(),
                    "an exact pass of other counts"
                );
                debug_assert_eq!(pass.seen, self.rows, "the exact pass saw other rows");
                for (load, &input) in loads.iter_mut().zip(&pass.inputs) {
                    *load += costs.work(input, 0);
                }
            }
            None => {
                for (load, &input) in loads.iter_mut().zip(sampled_inputs) {
                    *load += costs.work(input << self.shift, 0);
                }
            }
        }
        for (index, &(hash, [sampled_l, sampled_r])) in set_aside.iter().enumerate() {
            let [l, r] = match exact {
                Some(pass) => pass.rows[index],
                None => [sampled_l << self.shift, sampled_r << self.shift],
            };
            let pairs = u128::from(l) * u128::from(r);
            output += pairs;
            loads[placement.partition_of_hash(hash) as usize] += costs.work(0, pairs);
            keep_most(
                &mut most,
                &[(l.saturating_mul(r), hash), (l, hash), (r, hash)],
            );
        }
        skew_from(placement, &loads, output, &most, self.rows, costs)
    }
}

/// The keys an [`ExactPass`] counts, shared by its clones.
#[derive(Debug)]
struct ExactKeys {
    /// Each key's hash (lowest bit cleared) and its place in the pass's counts.
    index: rustc_hash::FxHashMap<u64, usize>,
    /// A bit per hash prefix of the keys counted: most rows are of none, and are turned away
    /// at one load.
    filter: Vec<u64>,
}

/// A sampled skew check's pass over every row again ([`TallyCounts::exact_pass`]): each
/// partition's input, and both sides' rows of the keys the sample found common.
#[derive(Clone, Debug)]
pub struct ExactPass {
    keys: Arc<ExactKeys>,
    placement: Partitioning,
    /// Each partition's non-NULL rows.
    inputs: Vec<u64>,
    /// Each counted key's rows on each side.
    rows: Vec<[u64; 2]>,
    /// Rows of each side seen, NULL keys included: the tally's, once every row is counted.
    seen: [u64; 2],
}

impl ExactPass {
    /// Counts one row of `side` with key `key`.
    #[inline]
    pub fn add<K: JoinKey>(&mut self, side: Side, key: &K) {
        self.seen[side.index()] += 1;
        if key.is_null() {
            return;
        }
        let hash = key.stable_hash() & !1;
        self.inputs[self.placement.partition_of_hash(hash) as usize] += 1;
        let bit = filter_bit(hash);
        if self.keys.filter[bit / 64] & (1 << (bit % 64)) != 0 {
            if let Some(&index) = self.keys.index.get(&hash) {
                self.rows[index][side.index()] += 1;
            }
        }
    }

    /// Adds the counts of `other`, a clone of the same pass given other rows.
    pub fn merge(&mut self, other: ExactPass) {
        debug_assert!(
            Arc::ptr_eq(&self.keys, &other.keys),
            "passes of other counts"
        );
        self.seen[0] += other.seen[0];
        self.seen[1] += other.seen[1];
        for (mine, theirs) in self.inputs.iter_mut().zip(other.inputs) {
            *mine += theirs;
        }
        for (mine, theirs) in self.rows.iter_mut().zip(other.rows) {
            mine[0] += theirs[0];
            mine[1] += theirs[1];
        }
    }
}

impl KeySink for ExactPass {
    fn add_key<K: JoinKey>(&mut self, side: Side, key: &K) {
        self.add(side, key);
    }
}

/// The skew check's verdict from Shuffle-Join's predicted loads: each partition's input records
/// and output pairs weighed by `costs` (`loads`, in 1,024ths of a record), the inner-join pairs
/// in all, the keys with the most pairs, left rows and right rows (`most`, as (count, hash)),
/// and each side's rows.
fn skew_from(
    placement: &Partitioning,
    loads: &[u128],
    output: u128,
    most: &[(u64, u64); 3],
    rows: [u64; 2],
    costs: WorkCosts,
) -> Option<Skew> {
    let mut worker_loads = vec![0u128; placement.workers()];
    for (partition, load) in loads.iter().enumerate() {
        worker_loads[placement.owner(partition as u32)] += load;
    }
    let total: u128 = worker_loads.iter().sum();
    let busiest = worker_loads.iter().copied().max().unwrap_or(0);
    // Rounded up: with pairs weighed like records, the excess over the mean of whole records.
    let excess = (busiest - total / worker_loads.len() as u128)
        .div_ceil(1024)
        .min(u64::MAX as u128) as u64;
    let fair_share = u128::from(rows[0] + rows[1]) / worker_loads.len() as u128;
    let count_cost = costs.am_join_extra(fair_share).min(u128::from(u64::MAX)) as u64;
    let partitions = placement.partitions().max(1) as f64;
    let fair = [
        (output as f64 / partitions).max(1.0),
        (rows[0] as f64 / partitions).max(1.0),
        (rows[1] as f64 / partitions).max(1.0),
    ];
    most.iter()
        .zip(fair)
        .zip(["output", "left input", "right input"])
        .map(|((&(value, hash), fair), what)| Skew {
            hash,
            share: value as f64 / fair,
            what,
            excess,
            count_cost,
            costs,
        })
        .filter(|skew| skew.share > 0.5)
        .reduce(|worst, skew| {
            if skew.share > worst.share {
                skew
            } else {
                worst
            }
        })
}

/// Rows of each side a process of a cluster samples for `auto`'s skew check (fewer if it holds
/// fewer): 32 KiB a side to send to every worker, and with N processes a sample of N x 4,096 rows
/// a side, in which a key that can unbalance a worker (a fair share of its input or output) is
/// seen hundreds of times.
pub const CLUSTER_SAMPLE_ROWS: u64 = 4096;

/// A process's sample of its own rows' keys, for `auto`'s skew check in a cluster, where no
/// process sees every key before the join and counting them all is AM-Join's whole first phase.
/// One row in about `rows / CLUSTER_SAMPLE_ROWS` of each side is kept, chosen by a hash of its
/// row number; [`sampled_skew`] weighs the samples of every process and predicts Shuffle-Join's
/// loads from them.
///
/// ```
/// use skewjoin_operators::Side;
/// use skewjoin_planner::skew_check::{sampled_skew, KeySample};
/// use skewjoin_planner::work_costs::WorkCosts;
///
/// // Two processes; key 7 is on a sixth of each one's rows on both sides.
/// let samples: Vec<KeySample> = (0..2u64)
///     .map(|process| {
///         let keys: Vec<u64> = (process * 50_000..process * 50_000 + 50_000)
///             .chain(std::iter::repeat(7).take(10_000))
///             .collect();
///         let mut sample = KeySample::for_rows(60_000, 60_000);
///         keys.iter().for_each(|key| sample.add(Side::Left, key));
///         keys.iter().for_each(|key| sample.add(Side::Right, key));
///         sample
///     })
///     .collect();
/// let skew = sampled_skew(&samples, 4, 4, WorkCosts::CLUSTER).expect("key 7 is hot");
/// assert!(skew.is_of(&7u64) && skew.am_pays());
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct KeySample {
    /// Each sampled non-NULL key's hash, its lowest bit replaced by its side (0 left, 1 right).
    hashes: Vec<u64>,
    /// Rows seen of each side, NULL keys included.
    rows: [u64; 2],
    /// Rows sampled of each side, NULL keys included.
    sampled: [u64; 2],
    /// A row is sampled when the hash of its row number is at most this.
    cut: [u64; 2],
}

impl KeySample {
    /// A sample of a process holding `left` and `right` rows.
    pub fn for_rows(left: u64, right: u64) -> KeySample {
        let cut = |rows: u64| {
            if rows <= CLUSTER_SAMPLE_ROWS {
                u64::MAX
            } else {
                u64::MAX / rows * CLUSTER_SAMPLE_ROWS
            }
        };
        KeySample {
            cut: [cut(left), cut(right)],
            ..KeySample::default()
        }
    }

    /// Sees the next row of `side`, with key `key`.
    #[inline]
    pub fn add<K: JoinKey>(&mut self, side: Side, key: &K) {
        let (index, row) = next_row(&mut self.rows, side);
        if mix64(row ^ SAMPLE_SALT[index]) > self.cut[index] {
            return;
        }
        self.sampled[index] += 1;
        if !key.is_null() {
            self.hashes.push((key.stable_hash() & !1) | index as u64);
        }
    }
}

/// The index of `side` (0 left, 1 right) and the number of its row now seen, counting it.
fn next_row(rows: &mut [u64; 2], side: Side) -> (usize, u64) {
    let index = side.index();
    rows[index] += 1;
    (index, rows[index] - 1)
}

/// A tally of keys read a row at a time: [`KeyTally`] for one process's skew check (and its
/// [`ExactPass`]), [`KeySample`] for a cluster's.
pub trait KeySink {
    /// Sees the next row of `side`, with key `key`.
    fn add_key<K: JoinKey>(&mut self, side: Side, key: &K);

    /// Sees the next `keys.len()` rows of `side`, with these keys.
    fn add_keys<K: JoinKey>(&mut self, side: Side, keys: &[K]) {
        keys.iter().for_each(|key| self.add_key(side, key));
    }
}

impl KeySink for KeyTally {
    fn add_key<K: JoinKey>(&mut self, side: Side, key: &K) {
        self.add(side, key);
    }

    fn add_keys<K: JoinKey>(&mut self, side: Side, keys: &[K]) {
        self.add_all(side, keys);
    }
}

impl KeySink for KeySample {
    fn add_key<K: JoinKey>(&mut self, side: Side, key: &K) {
        self.add(side, key);
    }
}

/// Sampled rows a key needs on one side, or on each of both, to be placed where Shuffle-Join
/// would put it in [`sampled_skew`]; the rows and pairs of the keys sampled less are spread evenly
/// over the partitions. Each sampled row stands for thousands on a large input, so two cold keys
/// that happen to be sampled once on each side would otherwise land as lumps of millions of
/// pairs on single partitions and read as skew: a key of `c` rows a side is sampled on 3 rows of
/// each side with a chance of about `(c p)^6 / 36` at sampling rate `p`, and keys that common are
/// what hash partitioning evens out anyway.
pub const PLACED_SAMPLES: [u32; 2] = [8, 3];

/// `auto`'s skew check in a cluster, from every process's [`KeySample`] (in any order): each
/// sampled row stands for its process's rows of that side over the rows it sampled, and every
/// key's rows are estimated from its sampled rows. The keys sampled often enough
/// ([`PLACED_SAMPLES`]) are placed where Shuffle-Join would put them and the rest spread evenly;
/// the verdict is [`KeyTally::skew`]'s on those loads, weighed by `costs`. The estimates are
/// summed in one order whatever order the samples came in, so every worker of the cluster
/// reaches the same verdict.
pub fn sampled_skew(
    samples: &[KeySample],
    partitions: usize,
    workers: usize,
    costs: WorkCosts,
) -> Option<Skew> {
    let placement = Partitioning::new(partitions.max(1), workers.max(1));
    let mut ordered: Vec<&KeySample> = samples.iter().collect();
    ordered.sort();
    // Per key: the estimated rows and the sampled rows of each side.
    type Estimate = ([f64; 2], [u32; 2]);
    let mut estimates: rustc_hash::FxHashMap<u64, Estimate> = Default::default();
    let mut rows = [0u64; 2];
    for sample in ordered {
        let weight = [0, 1].map(|side| match sample.sampled[side] {
            0 => 0.0,
            sampled => sample.rows[side] as f64 / sampled as f64,
        });
        rows[0] += sample.rows[0];
        rows[1] += sample.rows[1];
        for &word in &sample.hashes {
            let side = (word & 1) as usize;
            let (estimate, sampled) = estimates.entry(word & !1).or_default();
            estimate[side] += weight[side];
            sampled[side] += 1;
        }
    }
    let mut keys: Vec<(u64, Estimate)> = estimates.into_iter().collect();
    keys.sort_unstable_by_key(|(hash, _)| *hash);
    let mut loads = vec![0u128; placement.partitions()];
    let mut output = 0u128;
    let mut spread = 0u128;
    let mut most = [(0u64, 0u64); 3];
    for (hash, ([l, r], [sampled_l, sampled_r])) in keys {
        let (l, r) = (l.round() as u64, r.round() as u64);
        let pairs = u128::from(l) * u128::from(r);
        let load = costs.work(l + r, pairs);
        output += pairs;
        let [one_side, both_sides] = PLACED_SAMPLES;
        if sampled_l.max(sampled_r) >= one_side || sampled_l.min(sampled_r) >= both_sides {
            loads[placement.partition_of_hash(hash) as usize] += load;
            keep_most(
                &mut most,
                &[(l.saturating_mul(r), hash), (l, hash), (r, hash)],
            );
        } else {
            spread += load;
        }
    }
    let each = spread / loads.len() as u128;
    loads.iter_mut().for_each(|load| *load += each);
    skew_from(&placement, &loads, output, &most, rows, costs)
}

/// Keeps each of `candidates` that beats the one kept in `most`; ties keep the earlier, so
/// counting buckets in runs finds what counting them in one pass does.
fn keep_most(most: &mut [(u64, u64); 3], candidates: &[(u64, u64); 3]) {
    for (best, &candidate) in most.iter_mut().zip(candidates) {
        if candidate.0 > best.0 {
            *best = candidate;
        }
    }
}

/// `work` on each of `items`, on a scoped thread each when there are several, results in order.
fn on_threads<I: Send, R: Send>(items: Vec<I>, work: impl Fn(I) -> R + Sync) -> Vec<R> {
    if items.len() <= 1 {
        return items.into_iter().map(work).collect();
    }
    std::thread::scope(|scope| {
        let work = &work;
        let running: Vec<_> = items
            .into_iter()
            .map(|item| scope.spawn(move || work(item)))
            .collect();
        running
            .into_iter()
            .map(|thread| {
                thread
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .collect()
    })
}

/// What the keys of a run of a [`KeyTally`]'s buckets add to its skew check.
#[derive(Clone, Debug)]
struct BucketCounts {
    /// Inner-join pairs.
    output: u128,
    /// The key with the most pairs, left rows and right rows: (count, hash). The key with the
    /// most pairs has the largest share of the output whatever OUT is, and likewise for each
    /// side's rows: three candidates, kept while counting.
    most: [(u64, u64); 3],
    /// Each partition's input records and output pairs under Shuffle-Join, weighed (in
    /// 1,024ths of a record, [`WorkCosts::work`]); with sampling, its output pairs only, but
    /// for those of the keys set aside.
    loads: Vec<u128>,
    /// With sampling, each partition's sampled non-NULL rows.
    sampled_inputs: Vec<u64>,
    /// With sampling, the keys set aside to count exactly (hashes, lowest bit cleared), in
    /// bucket order, with their sampled rows of each side.
    set_aside: Vec<(u64, [u64; 2])>,
}

impl BucketCounts {
    fn new(partitions: usize) -> Self {
        BucketCounts {
            output: 0,
            most: [(0, 0); 3],
            loads: vec![0; partitions],
            sampled_inputs: vec![0; partitions],
            set_aside: Vec::new(),
        }
    }

    /// Counts the keys of `tally`'s buckets `buckets`, each bucket in a map of its own. With
    /// sampling (`shift` above 0), a key sampled on [`EXACT_SAMPLES`] rows or more of a side is
    /// set aside to be counted exactly, and the others' pairs are estimated; every partition's
    /// input is counted in sampled rows, to be counted exactly or estimated from them.
    fn of(
        tally: &KeyTally,
        buckets: std::ops::Range<usize>,
        placement: &Partitioning,
        shift: u32,
        costs: WorkCosts,
    ) -> Self {
        let mut this = BucketCounts::new(placement.partitions());
        let mut counts: rustc_hash::FxHashMap<u64, [u64; 2]> = Default::default();
        for index in buckets {
            counts.clear();
            for &word in tally.bucket(index) {
                counts.entry(word & !1).or_default()[(word & 1) as usize] += 1;
            }
            for (&hash, &[l, r]) in &counts {
                let partition = placement.partition_of_hash(hash) as usize;
                if shift > 0 {
                    this.sampled_inputs[partition] += l + r;
                    if l.max(r) >= EXACT_SAMPLES {
                        this.set_aside.push((hash, [l, r]));
                        continue;
                    }
                }
                let (l, r) = (l << shift, r << shift);
                let pairs = u128::from(l) * u128::from(r);
                this.output += pairs;
                // Sampled, the inputs are counted apart.
                let records = if shift == 0 { l + r } else { 0 };
                this.loads[partition] += costs.work(records, pairs);
                this.keep_most(&[(l.saturating_mul(r), hash), (l, hash), (r, hash)]);
            }
        }
        this
    }

    fn keep_most(&mut self, candidates: &[(u64, u64); 3]) {
        keep_most(&mut self.most, candidates);
    }

    /// Adds the counts of the buckets after this one's.
    fn add(&mut self, later: BucketCounts) {
        self.output += later.output;
        for (load, more) in self.loads.iter_mut().zip(&later.loads) {
            *load += more;
        }
        for (input, more) in self.sampled_inputs.iter_mut().zip(&later.sampled_inputs) {
            *input += more;
        }
        self.keep_most(&later.most);
        self.set_aside.extend(later.set_aside);
    }
}

/// Words of the exact pass's filter: 2^16 bits, 8 KiB, in a core's L1 cache.
const FILTER_WORDS: usize = 1 << 10;

/// A hash's bit in the exact pass's filter: bits below the top byte, which picks the bucket.
#[inline]
fn filter_bit(hash: u64) -> usize {
    ((hash >> 40) as usize) & (FILTER_WORDS * 64 - 1)
}

#[cfg(test)]
mod tests;
