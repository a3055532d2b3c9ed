//! What the partitions tell the owners of the small side's id ranges: the tracking modes, their
//! payloads and how the id space is cut into ranges.

use serde::{Deserialize, Serialize};

use crate::partition::Partitioning;

/// Bytes charged per tracking message for its header (owner partition and range start).
pub const MESSAGE_HEADER_BYTES: u64 = 8;

/// The key ids one partition matched within one owner's range, relative to the range start.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum MatchSet {
    /// One bit per id of the range.
    Bits(Vec<u64>),
    /// The matched ids, increasing.
    Ids(Vec<u32>),
}

impl MatchSet {
    /// The smaller encoding of the set bits of `bits` (a range of `len` ids).
    pub fn encode(bits: &[u64], len: usize) -> MatchSet {
        let count: usize = bits.iter().map(|w| w.count_ones() as usize).sum();
        // An id costs 4 bytes in a list; the bitset costs len/8.
        if count * 32 < len {
            let mut ids = Vec::with_capacity(count);
            for (word_index, &word) in bits.iter().enumerate() {
                let mut word = word;
                while word != 0 {
                    ids.push((word_index * 64) as u32 + word.trailing_zeros());
                    word &= word - 1;
                }
            }
            MatchSet::Ids(ids)
        } else {
            MatchSet::Bits(bits.to_vec())
        }
    }

    /// The payload size in bytes.
    pub fn bytes(&self) -> u64 {
        match self {
            MatchSet::Bits(words) => words.len() as u64 * 8,
            MatchSet::Ids(ids) => ids.len() as u64 * 4,
        }
    }

    /// ORs this set into `bits`.
    pub fn or_into(&self, bits: &mut [u64]) {
        match self {
            MatchSet::Bits(words) => bits.iter_mut().zip(words).for_each(|(b, w)| *b |= w),
            MatchSet::Ids(ids) => ids
                .iter()
                .for_each(|&id| bits[id as usize / 64] |= 1 << (id % 64)),
        }
    }
}

/// How the small side's matches are tracked: IB-Join, or one of the published baselines.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum TrackingMode {
    /// Matched key ids, a bitset or id list per owner's key-id range.
    Ib,
    /// DER: ids of locally unmatched small rows, sent to the owner of each row id.
    Der,
    /// DDR: the locally unmatched small rows themselves, sent to the owner of each row id.
    Ddr,
}

/// What a partition tells the owner of an id range.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum TrackPayload<K, S> {
    /// IB-Join: the key ids matched here.
    Keys(MatchSet),
    /// DER: row ids (relative to the range) not matched here.
    RowIds(Vec<u32>),
    /// DDR: rows (with ids relative to the range) not matched here.
    Rows(Vec<(u32, K, S)>),
}

/// A tracking message: `(owner partition, payload for the owner's range)`.
pub(super) type Tracking<K, S> = (u32, TrackPayload<K, S>);

/// The id range `[start, end)` owned by partition `owner` when `keys` ids are cut into P ranges.
pub fn id_range(partitioning: &Partitioning, owner: u32, keys: usize) -> std::ops::Range<usize> {
    let parts = partitioning.partitions();
    let start = owner as usize * keys / parts;
    let end = (owner as usize + 1) * keys / parts;
    start..end
}

/// The bits `[start, start + len)` of `bits`, shifted to start at bit 0.
pub(super) fn slice_bits(bits: &[u64], start: usize, len: usize) -> Vec<u64> {
    let mut out = vec![0u64; len.div_ceil(64)];
    for offset in 0..len {
        let bit = start + offset;
        if bits[bit / 64] & (1 << (bit % 64)) != 0 {
            out[offset / 64] |= 1 << (offset % 64);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn match_sets_round_trip_in_the_smaller_encoding() {
        let mut bits = vec![0u64; 4];
        bits[0] |= 1 << 3;
        bits[2] |= 1 << 63;
        let sparse = MatchSet::encode(&bits, 256);
        assert_eq!(sparse, MatchSet::Ids(vec![3, 191]));
        let mut back = vec![0u64; 4];
        sparse.or_into(&mut back);
        assert_eq!(back, bits);
        let dense = MatchSet::encode(&[u64::MAX; 4], 256);
        assert!(matches!(dense, MatchSet::Bits(_)));
        assert_eq!(dense.bytes(), 32);
    }

    #[test]
    fn id_ranges_cover_all_ids_once() {
        let part = Partitioning::new(7, 3);
        for keys in 0..30 {
            let mut next = 0;
            for owner in 0..7 {
                let range = id_range(&part, owner, keys);
                assert_eq!(range.start, next);
                next = range.end;
            }
            assert_eq!(next, keys);
        }
    }

    #[test]
    fn slice_bits_shifts() {
        let bits = vec![0b1010u64 << 60, 0b1];
        assert_eq!(slice_bits(&bits, 61, 4), vec![0b1101]);
    }
}
