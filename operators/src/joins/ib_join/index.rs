//! The broadcast small side as an index: its rows grouped by key, each distinct key with a dense
//! id that every worker assigns alike.

use crate::kernel::{Group, GroupedKeys};
use crate::key::JoinKey;

/// The broadcast small side, grouped by key; group `id` is the `id`-th smallest distinct key.
pub(super) struct Index<K, S> {
    pub(super) rows: Vec<(K, S)>,
    starts: Vec<usize>,
    /// The kernel's lookup over `rows`: every large record probes it, in batches whose cache
    /// misses overlap. Through an `FxHashMap` one miss at a time instead, a Small-Large full
    /// outer join (10^5 x 5 x 10^6) spent a third of its samples waiting on the map's keys and
    /// the small rows, and IB-Join ran a fifth slower than a Shuffle-Join.
    groups: GroupedKeys,
    /// The key id of every row position. Read only by joins that track which keys matched:
    /// an inner probe that read it for every record paid a third cache miss per probe, a tenth
    /// of `probe_batch`'s samples on the Small-Large inner join.
    row_ids: Vec<u32>,
}

impl<K: JoinKey, S> Index<K, S> {
    pub(super) fn new(mut rows: Vec<(K, S)>, order: fn(&mut [(K, S)])) -> Self {
        // Sorting by key alone fixes the key ids; `order` may also fix the rows' positions within
        // a group (DER and DDR name rows by position, so it must be the same on every worker).
        order(&mut rows);
        assert!(
            rows.len() < u32::MAX as usize,
            "the broadcast side has 2^32 - 1 rows or more"
        );
        let mut starts = Vec::new();
        let mut row_ids = Vec::with_capacity(rows.len());
        for index in 0..rows.len() {
            if index == 0 || rows[index - 1].0 != rows[index].0 {
                starts.push(index);
            }
            row_ids.push(starts.len() as u32 - 1);
        }
        starts.push(rows.len());
        let groups = GroupedKeys::new(&rows, &starts);
        Index {
            rows,
            starts,
            groups,
            row_ids,
        }
    }

    /// The groups of a batch of at most [`GroupedKeys::BATCH`] keys, into `found` (NULL keys,
    /// never in the small side, and `None` find nothing).
    #[inline]
    pub(super) fn probe_batch(&self, keys: &[Option<&K>], found: &mut [Option<Group>]) {
        self.groups.groups_of(&self.rows, keys, found);
    }

    /// The dense id of a group [`probe_batch`](Self::probe_batch) found.
    #[inline]
    pub(super) fn id_of(&self, group: Group) -> usize {
        self.row_ids[group.rows().start] as usize
    }

    #[inline]
    pub(super) fn rows_of(&self, group: Group) -> &[(K, S)] {
        &self.rows[group.rows()]
    }

    pub(super) fn keys(&self) -> usize {
        self.starts.len() - 1
    }

    pub(super) fn group(&self, id: usize) -> &[(K, S)] {
        &self.rows[self.starts[id]..self.starts[id + 1]]
    }

    /// The key id of every row position.
    pub(super) fn row_keys(&self) -> Vec<u32> {
        self.row_ids.clone()
    }
}

/// Orders rows by key only.
pub(super) fn by_key<K: JoinKey, S>(rows: &mut [(K, S)]) {
    rows.sort_by(|a, b| a.0.cmp(&b.0));
}

/// Orders rows by key, then by the unique row id they were tagged with at their source.
pub(super) fn by_key_and_id<K: JoinKey, S>(rows: &mut [(K, (u64, S))]) {
    rows.sort_by(|a, b| a.0.cmp(&b.0).then(a.1 .0.cmp(&b.1 .0)));
}
