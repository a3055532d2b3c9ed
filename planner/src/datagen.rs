//! Deterministic generator of skewed join inputs.
//!
//! [`generate`] builds a pair of tables joined on a `key` column whose keys
//! follow a Zipf distribution on each side, plus optional "join noise": rows
//! whose keys can never find a partner on the other side. [`JoinCounts`] gives
//! the exact output sizes of every join flavour so that operators can be
//! checked against ground truth.
//!
//! The same generator also runs compiled to WebAssembly in a browser, and the
//! two builds must produce bit-identical tables for a given [`GenSpec`]. So:
//!
//! * randomness comes from a PRNG implemented here (SplitMix64 to derive
//!   seeds, xoshiro256** for the streams) rather than from a crate whose
//!   algorithm may change between versions;
//! * transcendental functions come from `libm` (pure software, identical
//!   everywhere) instead of `f64::powf` and friends, which call the platform
//!   math library and may differ in the last bit;
//! * all arithmetic that feeds a random decision is done in `u64`/`u32`/`f64`,
//!   never in `usize`, whose width differs on `wasm32`; `usize` only indexes
//!   tables, with values already bounded by [`MAX_KEYS`].
//!
//! The pinned-output tests below pass unchanged on `wasm32-wasip1`.
//!
//! [`pavlo`] generates a second kind of pair with the same machinery: the string-keyed web-log
//! tables `rankings` and `uservisits` of the Pavlo et al. benchmark.
//!
//! # Algorithm
//!
//! Per side, each row draws, in this order from that side's key stream:
//!
//! 1. if `noise > 0`, a coin `u < noise` (u uniform in \[0, 1)); on heads the
//!    key is drawn uniformly from the side's private noise range (left
//!    `[keys, 2*keys)`, right `[2*keys, 3*keys)`), so it never matches;
//! 2. otherwise a Zipf rank in `0..keys` (by binary search of `u` in the
//!    normalised CDF of `1/r^s`), mapped to a key id through a seeded random
//!    permutation so that hot keys are not simply the smallest ids. With
//!    `s == 0` the id is drawn uniformly directly: a uniform rank pushed
//!    through a permutation is again uniform, so the permutation is skipped.
//!
//! The `value` column comes from a separate stream per side, so payloads do
//! not change when only the key distribution is tuned.
//!
//! Streams are independent xoshiro256** generators seeded from
//! `SplitMix64(seed ^ tag)` with one tag per purpose (left keys, left values,
//! right keys, right values, shared permutation, right-only permutation).

use std::collections::HashMap;

use skewjoin_operators::JoinType;

use crate::error::PlanError;
use crate::usage_err;

pub mod pavlo;

/// Largest supported key domain. Permutations are stored as `u32` (halving
/// their memory), and the bound keeps `keys` a valid `usize` on `wasm32` and
/// the noise ids (`< 3 * keys`) far inside `i64`.
pub const MAX_KEYS: u64 = u32::MAX as u64;

/// The most rows a generated side may have: the exact join counts stay within `u64` (a
/// product of two sides' rows), and the join engine numbers rows in 32 bits, `u32::MAX` marking
/// a missing side, so that a generated file can always be joined.
pub const MAX_ROWS: u64 = u32::MAX as u64 - 1;

/// Exclusive upper bound of the `value` payload column.
const VALUE_RANGE: u64 = 1_000_000;

// Stream tags: arbitrary distinct constants, XORed into the seed so that
// every purpose gets an unrelated SplitMix64 starting point.
const TAG_LEFT_KEYS: u64 = 0x4c45_4654_4b45_5953; // "LEFTKEYS"
const TAG_LEFT_VALUES: u64 = 0x4c45_4654_5641_4c53; // "LEFTVALS"
const TAG_RIGHT_KEYS: u64 = 0x5249_4748_4b45_5953; // "RIGHKEYS"
const TAG_RIGHT_VALUES: u64 = 0x5249_4748_5641_4c53; // "RIGHVALS"
const TAG_SHARED_PERM: u64 = 0x5348_5244_5045_524d; // "SHRDPERM"
const TAG_RIGHT_PERM: u64 = 0x5249_4748_5045_524d; // "RIGHPERM"

/// How to generate a pair of tables joined on `key`.
#[derive(Clone, Debug, PartialEq)]
pub struct GenSpec {
    pub left_rows: u64,
    pub right_rows: u64,
    /// Size of the shared key domain (distinct keys that may appear on both sides).
    pub keys: u64,
    /// Zipf exponent of each side (0.0 = uniform).
    pub left_skew: f64,
    pub right_skew: f64,
    /// false (default): the same ranks are hot on both sides (rank r maps to
    /// the same key id on both sides). true: the right side ranks keys by an
    /// independent permutation.
    pub independent: bool,
    /// Share of each side's rows (0.0..=1.0) whose key is drawn uniformly
    /// from that side's own key range, which never appears on the other side
    /// ("join noise").
    pub noise: f64,
    pub seed: u64,
}

impl Default for GenSpec {
    fn default() -> Self {
        GenSpec {
            left_rows: 100_000,
            right_rows: 100_000,
            keys: 10_000,
            left_skew: 1.0,
            right_skew: 1.0,
            independent: false,
            noise: 0.0,
            seed: 42,
        }
    }
}

impl GenSpec {
    /// Checks the spec before anything is allocated.
    ///
    /// # Errors
    ///
    /// A usage error naming the offending command-line flag, so a CLI can show it
    /// verbatim: rows above [`MAX_ROWS`], `--keys` outside `1..=MAX_KEYS`,
    /// `--left-skew`/`--right-skew`
    /// negative or not finite, `--noise` outside `[0, 1]`.
    pub fn validate(&self) -> Result<(), PlanError> {
        for (flag, rows) in [
            ("--left-rows", self.left_rows),
            ("--right-rows", self.right_rows),
        ] {
            if rows > MAX_ROWS {
                return usage_err!(
                    "{flag} (or --rows) must be at most {MAX_ROWS} rows per side, got {rows}"
                );
            }
        }
        if self.keys < 1 {
            return usage_err!("--keys must be at least 1, got {}", self.keys);
        }
        if self.keys > MAX_KEYS {
            return usage_err!("--keys must be at most {MAX_KEYS}, got {}", self.keys);
        }
        for (flag, skew) in [
            ("--left-skew", self.left_skew),
            ("--right-skew", self.right_skew),
        ] {
            // Written so that NaN fails too.
            if !(skew.is_finite() && skew >= 0.0) {
                return usage_err!("{flag} must be a finite number >= 0, got {skew}");
            }
        }
        if !(0.0..=1.0).contains(&self.noise) {
            return usage_err!("--noise must be between 0 and 1, got {}", self.noise);
        }
        Ok(())
    }
}

/// One generated table: column `key` plus payload columns `id` (row number
/// 0..n, i64) and `value` (pseudo-random i64 in 0..1_000_000).
#[derive(Clone, Debug, PartialEq)]
pub struct GenTable {
    pub key: Vec<i64>,
    pub id: Vec<i64>,
    pub value: Vec<i64>,
}

impl GenTable {
    pub fn len(&self) -> usize {
        self.key.len()
    }

    pub fn is_empty(&self) -> bool {
        self.key.is_empty()
    }
}

/// Exact output row counts of joining the two generated tables on key.
///
/// Semi and anti joins count rows of the preserved side (as SQL does), not
/// distinct keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct JoinCounts {
    pub inner: u64,
    pub left: u64,
    pub right: u64,
    pub full: u64,
    pub left_semi: u64,
    pub left_anti: u64,
    pub right_semi: u64,
    pub right_anti: u64,
}

impl JoinCounts {
    /// The output rows of join type `how`.
    pub fn rows(&self, how: JoinType) -> u64 {
        match how {
            JoinType::Inner => self.inner,
            JoinType::Left => self.left,
            JoinType::Right => self.right,
            JoinType::Full => self.full,
            JoinType::LeftSemi => self.left_semi,
            JoinType::LeftAnti => self.left_anti,
            JoinType::RightSemi => self.right_semi,
            JoinType::RightAnti => self.right_anti,
        }
    }

    /// Counts join outputs from per-key multiplicities, in time linear in the
    /// inputs (the inner join itself can reach 10^12 rows).
    ///
    /// # Panics
    ///
    /// If a count does not fit in `u64`, which needs more than 2^32 rows on
    /// both sides.
    pub fn of(left_keys: &[i64], right_keys: &[i64]) -> JoinCounts {
        let right_counts = key_counts(right_keys);
        let left_counts = key_counts(left_keys);

        // Products of two row counts can exceed u64 in principle; accumulate
        // exactly and refuse to return a wrong (wrapped or saturated) number.
        let mut inner: u128 = 0;
        let mut left_semi: u64 = 0;
        for (key, &l) in &left_counts {
            if let Some(&r) = right_counts.get(key) {
                inner += u128::from(l) * u128::from(r);
                left_semi += l;
            }
        }
        let right_semi: u64 = right_counts
            .iter()
            .filter(|(key, _)| left_counts.contains_key(key))
            .map(|(_, &r)| r)
            .sum();

        let inner = u64::try_from(inner).expect("inner join row count exceeds u64");
        let left_anti = left_keys.len() as u64 - left_semi;
        let right_anti = right_keys.len() as u64 - right_semi;
        let add = |a: u64, b: u64| a.checked_add(b).expect("join row count exceeds u64");
        JoinCounts {
            inner,
            left: add(inner, left_anti),
            right: add(inner, right_anti),
            full: add(add(inner, left_anti), right_anti),
            left_semi,
            left_anti,
            right_semi,
            right_anti,
        }
    }
}

fn key_counts(keys: &[i64]) -> HashMap<i64, u64> {
    let mut counts = HashMap::new();
    for &k in keys {
        *counts.entry(k).or_insert(0) += 1;
    }
    counts
}

/// The two generated tables.
#[derive(Clone, Debug, PartialEq)]
pub struct GeneratedPair {
    pub left: GenTable,
    pub right: GenTable,
}

impl GeneratedPair {
    /// Exact join output sizes of `left` and `right` on `key`.
    pub fn counts(&self) -> JoinCounts {
        JoinCounts::of(&self.left.key, &self.right.key)
    }
}

/// Generates the pair of tables described by `spec`. Deterministic: the same
/// spec yields bit-identical tables on every platform, wasm32 included.
///
/// # Panics
///
/// If `spec.validate()` fails, or a table cannot be allocated.
pub fn generate(spec: &GenSpec) -> GeneratedPair {
    if let Err(e) = spec.validate() {
        panic!("invalid GenSpec: {e}");
    }
    let keys = spec.keys;
    let skewed = |s: f64| s > 0.0;

    // Build each table and permutation only when some side needs it: for 10^7
    // keys they cost tens of megabytes and a noticeable share of the runtime.
    let left_table = skewed(spec.left_skew).then(|| ZipfTable::new(keys, spec.left_skew));
    let right_table = if !skewed(spec.right_skew) || spec.right_skew == spec.left_skew {
        None // uniform, or the same exponent: reuse the left table
    } else {
        Some(ZipfTable::new(keys, spec.right_skew))
    };
    let needs_shared_perm =
        skewed(spec.left_skew) || (skewed(spec.right_skew) && !spec.independent);
    let shared_perm = needs_shared_perm.then(|| permutation(keys, spec.seed, TAG_SHARED_PERM));
    let right_own_perm = (skewed(spec.right_skew) && spec.independent)
        .then(|| permutation(keys, spec.seed, TAG_RIGHT_PERM));

    let left_ranks = left_table
        .as_ref()
        .zip(shared_perm.as_deref())
        .map(|(table, perm)| ZipfRanks { table, perm });
    let right_ranks = if skewed(spec.right_skew) {
        let table = right_table.as_ref().or(left_table.as_ref());
        let perm = right_own_perm.as_deref().or(shared_perm.as_deref());
        table
            .zip(perm)
            .map(|(table, perm)| ZipfRanks { table, perm })
    } else {
        None
    };

    let left = generate_side(Side {
        rows: spec.left_rows,
        keys,
        ranks: left_ranks,
        noise: spec.noise,
        noise_offset: keys,
        key_rng: Xoshiro256StarStar::derive(spec.seed, TAG_LEFT_KEYS),
        value_rng: Xoshiro256StarStar::derive(spec.seed, TAG_LEFT_VALUES),
    });
    let right = generate_side(Side {
        rows: spec.right_rows,
        keys,
        ranks: right_ranks,
        noise: spec.noise,
        noise_offset: 2 * keys,
        key_rng: Xoshiro256StarStar::derive(spec.seed, TAG_RIGHT_KEYS),
        value_rng: Xoshiro256StarStar::derive(spec.seed, TAG_RIGHT_VALUES),
    });
    GeneratedPair { left, right }
}

/// A Zipf sampler: rank table plus the rank -> key id permutation.
#[derive(Clone, Copy)]
struct ZipfRanks<'a> {
    table: &'a ZipfTable,
    perm: &'a [u32],
}

/// Everything needed to generate one side.
struct Side<'a> {
    rows: u64,
    keys: u64,
    /// `None` for a uniform side (skew 0).
    ranks: Option<ZipfRanks<'a>>,
    noise: f64,
    /// First id of this side's private noise range `[offset, offset + keys)`.
    noise_offset: u64,
    key_rng: Xoshiro256StarStar,
    value_rng: Xoshiro256StarStar,
}

fn generate_side(side: Side<'_>) -> GenTable {
    let n = usize::try_from(side.rows).expect("row count does not fit in memory");
    let Side {
        mut key_rng,
        mut value_rng,
        ..
    } = side;
    let mut key = Vec::with_capacity(n);
    let mut id = Vec::with_capacity(n);
    let mut value = Vec::with_capacity(n);
    for row in 0..side.rows {
        // Skip the coin when there is no noise: no draw, no branch on it.
        let is_noise = side.noise > 0.0 && unit_f64(key_rng.next_u53()) < side.noise;
        let k = if is_noise {
            side.noise_offset + key_rng.below(side.keys)
        } else {
            match side.ranks {
                Some(z) => {
                    let rank = z.table.rank(key_rng.next_u53());
                    u64::from(z.perm[rank as usize])
                }
                None => key_rng.below(side.keys),
            }
        };
        // Ids are below 3 * MAX_KEYS < 2^34 and row numbers below 2^63 in any
        // table that fits in memory, so these casts are exact.
        key.push(k as i64);
        id.push(row as i64);
        value.push((value_rng.next_u64() % VALUE_RANGE) as i64);
    }
    GenTable { key, id, value }
}

/// Inverse-CDF sampler of Zipf ranks.
///
/// Sampling is "first rank whose CDF exceeds u" by binary search. Over 10^7
/// keys a plain search of the 80 MB table costs a cache miss per step, so a
/// guide table narrows it first: `guide[b]` is the answer for the bucket's
/// lower edge `u = b / 2^bits`, and since the answer is monotone in `u`, any
/// `u` in bucket `b` has its answer in `guide[b]..=guide[b + 1]`. Bucket edges
/// are exact multiples of 2^-53, so the guide only skips work: the result is
/// bit-for-bit that of the plain search over the whole table.
struct ZipfTable {
    cdf: Vec<f64>,
    /// `2^bits + 1` entries; the last is `keys`.
    guide: Vec<u32>,
    bits: u32,
}

/// Cap on guide-table buckets (16 MiB of `u32`).
const MAX_GUIDE_BITS: u32 = 22;

impl ZipfTable {
    fn new(keys: u64, s: f64) -> Self {
        let cdf = zipf_cdf(keys, s);
        // About one bucket per key, which keeps the searched range tiny.
        let bits = (64 - (keys - 1).leading_zeros()).min(MAX_GUIDE_BITS);
        let buckets = 1u64 << bits;
        let mut guide = Vec::with_capacity((buckets + 1) as usize);
        let mut i = 0usize;
        for b in 0..=buckets {
            let edge = unit_f64(b << (53 - bits)); // 1.0 for b == buckets
            while i < cdf.len() && cdf[i] <= edge {
                i += 1;
            }
            // i <= keys <= MAX_KEYS = u32::MAX.
            guide.push(i as u32);
        }
        ZipfTable { cdf, guide, bits }
    }

    /// The 0-based rank for `u = m / 2^53`, where `m` is a 53-bit integer.
    fn rank(&self, m: u64) -> u64 {
        let u = unit_f64(m);
        let b = (m >> (53 - self.bits)) as usize;
        let lo = self.guide[b] as usize;
        // The last CDF entry is exactly 1.0 > u, so the answer is at most
        // keys - 1 even where the next edge's answer is keys.
        let hi = (self.guide[b + 1] as usize).min(self.cdf.len() - 1);
        // Zero-probability ranks share their predecessor's CDF value and so
        // are never chosen.
        (lo + self.cdf[lo..=hi].partition_point(|&c| c <= u)) as u64
    }
}

/// Maps a 53-bit integer `m` to `m / 2^53` in [0, 1], exactly.
fn unit_f64(m: u64) -> f64 {
    m as f64 * (1.0 / (1u64 << 53) as f64)
}

/// Normalised CDF of P(rank r) ∝ 1/r^s over ranks 1..=keys, indexed from 0.
fn zipf_cdf(keys: u64, s: f64) -> Vec<f64> {
    let n = usize::try_from(keys).expect("key domain does not fit in memory");
    let mut cdf = Vec::with_capacity(n);
    let mut total = 0.0f64;
    for r in 1..=keys {
        // libm, not f64::powf: the result must be bit-identical on wasm32.
        total += libm::pow(r as f64, -s);
        cdf.push(total);
    }
    // Dividing by the final partial sum maps it to exactly 1.0, which the
    // sampler relies on; division by a positive constant keeps the table
    // non-decreasing.
    for c in &mut cdf {
        *c /= total;
    }
    cdf
}

/// A seeded uniformly random permutation of `0..keys` (Fisher–Yates).
fn permutation(keys: u64, seed: u64, tag: u64) -> Vec<u32> {
    // validate() caps keys at MAX_KEYS = u32::MAX, so every id fits in u32.
    let mut perm: Vec<u32> = (0..keys).map(|k| k as u32).collect();
    let mut rng = Xoshiro256StarStar::derive(seed, tag);
    for i in (1..keys).rev() {
        let j = rng.below(i + 1);
        perm.swap(i as usize, j as usize);
    }
    perm
}

/// SplitMix64 (Steele, Lea & Flood), used only to expand a 64-bit seed into
/// xoshiro256** state, as its authors recommend.
#[derive(Clone, Debug)]
struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    fn new(seed: u64) -> Self {
        SplitMix64 { state: seed }
    }

    fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// xoshiro256** (Blackman & Vigna): fast, 256-bit state, passes BigCrush;
/// plenty for test data and trivially portable.
#[derive(Clone, Debug, PartialEq)]
struct Xoshiro256StarStar {
    s: [u64; 4],
}

impl Xoshiro256StarStar {
    /// The stream for one purpose (`tag`) of one `seed`.
    fn derive(seed: u64, tag: u64) -> Self {
        let mut sm = SplitMix64::new(seed ^ tag);
        // SplitMix64's output function is a bijection applied to distinct
        // counter values, so at most one of the four words is zero and the
        // forbidden all-zero state cannot occur.
        Xoshiro256StarStar {
            s: [sm.next_u64(), sm.next_u64(), sm.next_u64(), sm.next_u64()],
        }
    }

    fn next_u64(&mut self) -> u64 {
        let result = self.s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        result
    }

    /// The top 53 bits of the next output: with [`unit_f64`], a uniform
    /// `f64` in [0, 1) whose every value is exactly representable.
    fn next_u53(&mut self) -> u64 {
        self.next_u64() >> 11
    }

    /// Unbiased uniform integer in `0..n` (`n > 0`) by Lemire's
    /// multiply-and-reject method: integer-only, hence portable.
    fn below(&mut self, n: u64) -> u64 {
        debug_assert!(n > 0);
        let mut m = u128::from(self.next_u64()) * u128::from(n);
        if (m as u64) < n {
            // Reject the few low products that would over-represent some
            // outputs; the threshold is 2^64 mod n.
            let threshold = n.wrapping_neg() % n;
            while (m as u64) < threshold {
                m = u128::from(self.next_u64()) * u128::from(n);
            }
        }
        (m >> 64) as u64
    }
}

#[cfg(test)]
mod tests;
