//! Stable 64-bit hashing: the same value hashes the same on every platform, process and build.
//!
//! Routing decides which partition a key belongs to, and the browser build must route exactly like
//! the native one, so partitioning cannot use `std`'s randomly seeded hasher or a hasher whose
//! output depends on CPU features. Checksums of join output use the same functions.

/// The finaliser of SplitMix64: a bijective mix with full avalanche.
#[inline]
pub const fn mix64(mut x: u64) -> u64 {
    x ^= x >> 30;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^= x >> 27;
    x = x.wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// A streaming hasher whose output is defined by this file alone.
#[derive(Clone, Copy, Debug)]
pub struct StableHasher {
    state: u64,
}

impl Default for StableHasher {
    fn default() -> Self {
        Self::new()
    }
}

impl StableHasher {
    /// A hasher in its initial state.
    pub const fn new() -> Self {
        StableHasher {
            state: 0x243f_6a88_85a3_08d3,
        }
    }

    /// Feeds one 64-bit word.
    #[inline]
    pub fn write_u64(&mut self, word: u64) {
        self.state = step(self.state, word);
    }

    /// Feeds a byte string; its length is included so that `"ab","c"` and `"a","bc"` differ.
    /// Its bytes go in as little-endian words of eight, the last zero-padded.
    #[inline]
    pub fn write_bytes(&mut self, bytes: &[u8]) {
        let len = bytes.len();
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            self.write_u64(u64::from_le_bytes(chunk.try_into().expect("8 bytes")));
        }
        let tail = chunks.remainder().len();
        if len >= 8 {
            // The tail is the top of the string's last eight bytes: one load and a shift, and
            // the word fed or not by a select, where branching on the tail's length (which
            // varies from string to string) mispredicted.
            let last = u64::from_le_bytes(bytes[len - 8..].try_into().expect("8 bytes"));
            let fed = step(self.state, (last >> 1) >> (63 - 8 * tail));
            self.state = std::hint::select_unpredictable(tail > 0, fed, self.state);
        } else if tail > 0 {
            self.write_u64(tail_word(chunks.remainder()));
        }
        self.write_u64(len as u64 ^ LENGTH_SALT);
    }

    /// Feeds what [`write_bytes`](Self::write_bytes) feeds for a byte string of `len` bytes, at
    /// most 16, given as the low bytes of `bytes` (little-endian; what lies above `len` is
    /// ignored): the inline form of a short string in an Arrow view, hashed without a slice.
    /// Both words are computed and the state chosen by selects, not branches on the length.
    #[inline]
    pub fn write_short(&mut self, bytes: u128, len: usize) {
        debug_assert!(len <= 16, "a short string has at most 16 bytes");
        let low = bytes as u64 & low_bytes(len.min(8));
        let high = (bytes >> 64) as u64 & low_bytes(len.saturating_sub(8));
        let one = step(self.state, low);
        let two = step(one, high);
        let fed = std::hint::select_unpredictable(len > 8, two, one);
        self.state = std::hint::select_unpredictable(len > 0, fed, self.state);
        self.write_u64(len as u64 ^ LENGTH_SALT);
    }

    /// The hash of everything fed so far.
    #[inline]
    pub fn finish(&self) -> u64 {
        mix64(self.state)
    }
}

/// Mixed into a byte string's length, its last word.
const LENGTH_SALT: u64 = 0xff51_afd7_ed55_8ccd;

/// The state after feeding `word` in state `state`.
#[inline]
fn step(state: u64, word: u64) -> u64 {
    (state.rotate_left(23) ^ word).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// A mask of the low `len` bytes of a word, for `len` in `0..=8`.
#[inline]
fn low_bytes(len: usize) -> u64 {
    (u128::from(u64::MAX) >> (64 - 8 * len.min(8))) as u64
}

/// The 1 to 7 bytes of `tail` as a little-endian word, zero above them: read as two
/// overlapping loads rather than a copy of variable length, which costs a call to `memcpy` per
/// string (most of the time of hashing a TPC-H string column).
#[inline]
fn tail_word(tail: &[u8]) -> u64 {
    let len = tail.len();
    debug_assert!((1..8).contains(&len));
    if len >= 4 {
        let low = u32::from_le_bytes(tail[..4].try_into().expect("4 bytes"));
        let high = u32::from_le_bytes(tail[len - 4..].try_into().expect("4 bytes"));
        u64::from(low) | (u64::from(high) << (8 * (len - 4)))
    } else {
        // The first, middle and last bytes: for 1 to 3 bytes, every byte (some twice).
        u64::from(tail[0])
            | (u64::from(tail[len / 2]) << (8 * (len / 2)))
            | (u64::from(tail[len - 1]) << (8 * (len - 1)))
    }
}

/// Stable hash of one 64-bit integer.
#[inline]
pub fn hash_u64(x: u64) -> u64 {
    mix64(x ^ 0x2545_f491_4f6c_dd1d)
}

/// Stable hash of a byte string.
#[inline]
pub fn hash_bytes(bytes: &[u8]) -> u64 {
    let mut hasher = StableHasher::new();
    hasher.write_bytes(bytes);
    hasher.finish()
}

/// The row hash standing in for the missing side of a padded, semi or anti output row.
pub const PADDING_ROW_HASH: u64 = 0x7061_6464_696e_6721;

/// The contribution of one output row to a join's checksum, from the stable hashes of its left
/// and right input rows (`None` for a padded or absent side).
///
/// A join's checksum is the wrapping sum of this over all output rows: independent of the order
/// rows are produced in, and of how they are spread over workers, but sensitive to which left
/// row is paired with which right row (the right hash is rotated and multiplied before mixing, so
/// swapping partners changes the sum).
#[inline]
pub fn pair_checksum(left: Option<u64>, right: Option<u64>) -> u64 {
    let left = left.unwrap_or(PADDING_ROW_HASH);
    let right = right.unwrap_or(PADDING_ROW_HASH ^ 0xffff);
    mix64(left ^ spread_right(right))
}

/// The right row hash's part of a [`pair_checksum`].
#[inline(always)]
fn spread_right(right: u64) -> u64 {
    right.rotate_left(29).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// Pairs from which a group's checksum is worth a vectorised loop.
#[cfg(target_arch = "x86_64")]
const VECTOR_MIN_PAIRS: usize = 16;

/// The wrapping sum of [`pair_checksum`] over the pairs of each left row hashed in `lefts` with
/// the right row hashed `right`: a hot key's group of output rows at once.
///
/// The checksum is most of the work of a join whose output is counted rather than written (two
/// 64-bit multiplies a pair). Where the CPU multiplies 64-bit lanes in vector registers
/// (AVX-512DQ, found at run time), the loop runs eight pairs at a time; the sum is the same.
#[inline]
pub fn pair_checksum_sum_lefts(lefts: &[u64], right: u64) -> u64 {
    let spread = spread_right(right);
    #[cfg(target_arch = "x86_64")]
    if lefts.len() >= VECTOR_MIN_PAIRS && vector::available() {
        // SAFETY: the CPU has the features the function is compiled for.
        return unsafe { vector::sum_lefts(lefts, spread) };
    }
    sum_lefts(lefts, spread)
}

/// The wrapping sum of [`pair_checksum`] over the pairs of the left row hashed `left` with each
/// right row hashed in `rights`; see [`pair_checksum_sum_lefts`].
#[inline]
pub fn pair_checksum_sum_rights(left: u64, rights: &[u64]) -> u64 {
    #[cfg(target_arch = "x86_64")]
    if rights.len() >= VECTOR_MIN_PAIRS && vector::available() {
        // SAFETY: the CPU has the features the function is compiled for.
        return unsafe { vector::sum_rights(left, rights) };
    }
    sum_rights(left, rights)
}

/// Row hashes of a group gathered before their checksums are summed in one loop.
const CHUNK: usize = 256;

/// Groups of fewer pairs are summed a pair at a time, without gathering their hashes.
const GATHER_MIN: usize = 16;

/// Sums a group's [`pair_checksum`]s when its row hashes lie apart, a hash in each row: gathers
/// them into a chunk at a time for [`pair_checksum_sum_lefts`] and
/// [`pair_checksum_sum_rights`], whose loop wants them side by side. Keep one per sink: the chunk
/// is allocated once.
///
/// ```
/// use skewjoin_operators::hash::{hash_u64, pair_checksum, GroupChecksums};
///
/// let rows: Vec<(u32, u64)> = (0..1000).map(|i| (i, hash_u64(i as u64))).collect();
/// let right = hash_u64(7);
/// let mut sums = GroupChecksums::new();
/// let group = sums.sum_lefts(rows.iter().map(|(_, hash)| *hash), right);
/// let pairs = rows.iter().fold(0u64, |sum, (_, hash)| {
///     sum.wrapping_add(pair_checksum(Some(*hash), Some(right)))
/// });
/// assert_eq!(group, pairs);
/// ```
pub struct GroupChecksums {
    chunk: Box<[u64; CHUNK]>,
}

impl Default for GroupChecksums {
    fn default() -> Self {
        Self::new()
    }
}

impl GroupChecksums {
    /// A summer with its chunk.
    pub fn new() -> Self {
        GroupChecksums {
            chunk: Box::new([0; CHUNK]),
        }
    }

    /// The wrapping sum of [`pair_checksum`] over each left row hashed in `lefts` with the right
    /// row hashed `right`.
    #[inline]
    pub fn sum_lefts(&mut self, lefts: impl ExactSizeIterator<Item = u64>, right: u64) -> u64 {
        if lefts.len() < GATHER_MIN {
            return lefts.fold(0u64, |sum, left| {
                sum.wrapping_add(pair_checksum(Some(left), Some(right)))
            });
        }
        self.in_chunks(lefts, |hashes| pair_checksum_sum_lefts(hashes, right))
    }

    /// The wrapping sum of [`pair_checksum`] over the left row hashed `left` with each right row
    /// hashed in `rights`.
    #[inline]
    pub fn sum_rights(&mut self, left: u64, rights: impl ExactSizeIterator<Item = u64>) -> u64 {
        if rights.len() < GATHER_MIN {
            return rights.fold(0u64, |sum, right| {
                sum.wrapping_add(pair_checksum(Some(left), Some(right)))
            });
        }
        self.in_chunks(rights, |hashes| pair_checksum_sum_rights(left, hashes))
    }

    /// The wrapping sum of `sum_of` over `hashes`, gathered a chunk at a time.
    #[inline]
    fn in_chunks(
        &mut self,
        hashes: impl Iterator<Item = u64>,
        sum_of: impl Fn(&[u64]) -> u64,
    ) -> u64 {
        let mut hashes = hashes;
        let mut sum = 0u64;
        loop {
            // A loop of its own, with no test but the iterator's end, so it unrolls.
            let mut filled = 0;
            for (slot, hash) in self.chunk.iter_mut().zip(&mut hashes) {
                *slot = hash;
                filled += 1;
            }
            sum = sum.wrapping_add(sum_of(&self.chunk[..filled]));
            if filled < CHUNK {
                return sum;
            }
        }
    }
}

#[inline(always)]
fn sum_lefts(lefts: &[u64], spread: u64) -> u64 {
    lefts
        .iter()
        .fold(0u64, |sum, &left| sum.wrapping_add(mix64(left ^ spread)))
}

#[inline(always)]
fn sum_rights(left: u64, rights: &[u64]) -> u64 {
    rights.iter().fold(0u64, |sum, &right| {
        sum.wrapping_add(mix64(left ^ spread_right(right)))
    })
}

/// The same loops compiled for AVX-512, which the compiler vectorises eight lanes wide.
#[cfg(target_arch = "x86_64")]
mod vector {
    /// Whether this CPU runs [`sum_lefts`] and [`sum_rights`] (the answer is cached by `std`).
    #[inline]
    pub(super) fn available() -> bool {
        std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512dq")
    }

    #[target_feature(enable = "avx512f,avx512dq")]
    pub(super) fn sum_lefts(lefts: &[u64], spread: u64) -> u64 {
        super::sum_lefts(lefts, spread)
    }

    #[target_feature(enable = "avx512f,avx512dq")]
    pub(super) fn sum_rights(left: u64, rights: &[u64]) -> u64 {
        super::sum_rights(left, rights)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A byte string's words as the definition states them: eight bytes at a time, the last
    /// padded with zeros, then the length.
    fn bytes_by_definition(bytes: &[u8]) -> u64 {
        let mut hasher = StableHasher::new();
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            hasher.write_u64(u64::from_le_bytes(word));
        }
        hasher.write_u64(bytes.len() as u64 ^ LENGTH_SALT);
        hasher.finish()
    }

    #[test]
    fn byte_strings_hash_by_the_definition_at_every_length() {
        let bytes: Vec<u8> = (0..40u64).map(|i| (hash_u64(i) >> 13) as u8 | 1).collect();
        for len in 0..=bytes.len() {
            for start in [0, 3] {
                let string = &bytes[start..(start + len).min(bytes.len())];
                let expected = bytes_by_definition(string);
                assert_eq!(hash_bytes(string), expected, "{} bytes", string.len());
                if string.len() <= 16 {
                    // Whatever lies above the string in the word is ignored.
                    let mut word = [0xa5u8; 16];
                    word[..string.len()].copy_from_slice(string);
                    let mut short = StableHasher::new();
                    short.write_short(u128::from_le_bytes(word), string.len());
                    assert_eq!(short.finish(), expected, "{} bytes, short", string.len());
                }
            }
        }
    }

    #[test]
    fn group_checksums_are_sums_of_pair_checksums_at_every_length() {
        // On a CPU with AVX-512 the longer groups take the vectorised loop, with its remainder.
        let hashes: Vec<u64> = (0..1_000u64).map(hash_u64).collect();
        let other = hash_u64(99);
        for length in (0..40).chain([63, 64, 65, 127, 999, 1_000]) {
            let group = &hashes[..length];
            let lefts = group.iter().fold(0u64, |sum, &left| {
                sum.wrapping_add(pair_checksum(Some(left), Some(other)))
            });
            let rights = group.iter().fold(0u64, |sum, &right| {
                sum.wrapping_add(pair_checksum(Some(other), Some(right)))
            });
            assert_eq!(pair_checksum_sum_lefts(group, other), lefts, "{length}");
            assert_eq!(pair_checksum_sum_rights(other, group), rights, "{length}");
        }
    }

    #[test]
    fn hashes_are_fixed_across_builds() {
        // These constants pin the function: routing and checksums must never change silently,
        // or files of metrics written by an older build stop being comparable.
        assert_eq!(hash_u64(0), mix64(0x2545_f491_4f6c_dd1d));
        assert_ne!(hash_bytes(b"ab"), hash_bytes(b"ba"));
        assert_ne!(hash_bytes(b""), hash_bytes(b"\0"));
        assert_ne!(hash_bytes(b"abcdefgh"), hash_bytes(b"abcdefgh\0"));
    }

    #[test]
    fn mix_is_a_bijection_on_a_sample() {
        let mut seen = std::collections::HashSet::new();
        for i in 0..10_000u64 {
            assert!(seen.insert(mix64(i)));
        }
    }
}
