//! IB-Join (Index-Broadcast-Join): broadcast the small side as a key index and track matches by
//! key id, so that joins preserving, semi-joining or anti-joining the small side can broadcast it.
//!
//! The small side S is copied to every worker and grouped by key; each distinct key gets a dense
//! id, its rank among the sorted distinct keys, so every worker (which receives the same set)
//! assigns the same id to the same key without talking to the others. The large side stays in
//! place and probes. When the join type needs to know which S rows matched anywhere, each
//! partition records the ids it matched; the id space is cut into P contiguous ranges, range `r`
//! owned by partition `r`, and each partition sends every owner only its range (a bitset, or a
//! sorted id list when that is smaller). The owner ORs what it receives and emits the S rows of
//! its never-matched ids (padded, or as is for anti) or, for semi joins, of its matched ids, each
//! exactly once. Matching is a property of the key, so no row ids and no padded rows move.
//!
//! The large side does not move: [`ib_join_in_place`] probes each large record on the worker
//! that holds it, with no routing operator and no exchange, straight from the batches it
//! arrived in (only with fewer partitions than workers, where some workers host none, are large
//! records exchanged to their home partitions). [`ib_join_routed`] takes a large side routed
//! anywhere, for callers that move it on purpose.
//!
//! The dataflow has no loop: the tracking step is a second exchange after the probe at the same
//! timestamp, so the output at `t` is complete once the tracking operator's frontier passes `t`.
//! Traffic is counted per partition into the [`LoadRecorder`]: broadcast rows received and
//! tracking messages sent ([`TrafficCounters`](crate::load::TrafficCounters)).

use std::cell::RefCell;
use std::rc::Rc;

use serde::{Deserialize, Serialize};
use timely::dataflow::channels::pact::{Exchange, ParallelizationContract, Pipeline};
use timely::dataflow::operators::generic::Operator;
use timely::dataflow::operators::{Capability, Concat, OkErr};
use timely::dataflow::StreamVec;
use timely::progress::Timestamp;
use timely::ExchangeData;

use crate::config::JoinConfig;
use crate::join_logic::{each_row, JoinLogic, Swapped};
use crate::join_type::{JoinType, Side};
use crate::kernel::{GroupedKeys, GROUP_PIECE};
use crate::key::JoinKey;
use crate::load::LoadRecorder;
use crate::partition::Partitioning;
use crate::partitioned_join::{OUTPUT_BATCH, OUTPUT_BUDGET};
use crate::reference::JoinedRow;
use crate::route::{route, RoundRobin, Route, Routed};

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
type Tracking<K, S> = (u32, TrackPayload<K, S>);

/// The id range `[start, end)` owned by partition `owner` when `keys` ids are cut into P ranges.
pub fn id_range(partitioning: &Partitioning, owner: u32, keys: usize) -> std::ops::Range<usize> {
    let parts = partitioning.partitions();
    let start = owner as usize * keys / parts;
    let end = (owner as usize + 1) * keys / parts;
    start..end
}

/// Where one distinct key of the index lives: its id and its rows `rows[start..end]`. Kept in the
/// hash table's value so that a probe reads one table slot and then the rows, not a third array.
#[derive(Clone, Copy, Debug)]
struct Group {
    id: u32,
    start: u32,
    end: u32,
}

/// The broadcast small side, grouped by key; group `id` is the `id`-th smallest distinct key.
struct Index<K, S> {
    rows: Vec<(K, S)>,
    starts: Vec<usize>,
    /// The kernel's lookup over `rows`: every large record probes it, in batches whose cache
    /// misses overlap. Through an `FxHashMap` one miss at a time instead, a Small-Large full
    /// outer join (10^5 x 5 x 10^6) spent a third of its samples waiting on the map's keys and
    /// the small rows, and IB-Join ran a fifth slower than a Shuffle-Join.
    groups: GroupedKeys,
    /// The key id of every row position.
    row_ids: Vec<u32>,
}

impl<K: JoinKey, S> Index<K, S> {
    fn new(mut rows: Vec<(K, S)>, order: fn(&mut [(K, S)])) -> Self {
        // Sorting by key alone fixes the key ids; `order` may also fix the rows' positions within
        // a group (DER and DDR name rows by position, so it must be the same on every worker).
        order(&mut rows);
        assert!(
            rows.len() < u32::MAX as usize,
            "the broadcast side has 2^32 rows or more"
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
    fn probe_batch(&self, keys: &[Option<&K>], found: &mut [Option<Group>]) {
        let mut groups = [None; GroupedKeys::BATCH];
        self.groups.groups_of(&self.rows, keys, &mut groups);
        for (group, found) in groups[..keys.len()].iter().zip(found.iter_mut()) {
            *found = group.map(|group| {
                let rows = group.rows();
                Group {
                    id: self.row_ids[rows.start],
                    start: rows.start as u32,
                    end: rows.end as u32,
                }
            });
        }
    }

    #[inline]
    fn rows_of(&self, group: Group) -> &[(K, S)] {
        &self.rows[group.start as usize..group.end as usize]
    }

    fn keys(&self) -> usize {
        self.starts.len() - 1
    }

    fn group(&self, id: usize) -> &[(K, S)] {
        &self.rows[self.starts[id]..self.starts[id + 1]]
    }

    /// The key id of every row position.
    fn row_keys(&self) -> Vec<u32> {
        self.row_ids.clone()
    }
}

/// Orders rows by key only.
fn by_key<K: JoinKey, S>(rows: &mut [(K, S)]) {
    rows.sort_by(|a, b| a.0.cmp(&b.0));
}

/// Orders rows by key, then by the unique row id they were tagged with at their source.
fn by_key_and_id<K: JoinKey, S>(rows: &mut [(K, (u64, S))]) {
    rows.sort_by(|a, b| a.0.cmp(&b.0).then(a.1 .0.cmp(&b.1 .0)));
}

/// An equi-join that broadcasts the small side as a key index and tracks its matches by key id.
///
/// ```
/// use skewjoin_operators::{IbJoin, JoinConfig, JoinType, Side};
/// use timely::dataflow::operators::{Capture, ToStream};
/// use timely::dataflow::operators::capture::Extract;
///
/// let captured = timely::example(|scope| {
///     let large = (0..6u64).map(|i| (i % 2, i)).to_stream(scope).container::<Vec<_>>();
///     let small = vec![(1u64, 'o'), (5, 'x')].to_stream(scope).container::<Vec<_>>();
///     // A full join preserves the broadcast side: key 5 matches nothing and comes out padded.
///     large
///         .ib_join(small, JoinType::Full, Side::Right, &JoinConfig::new())
///         .capture()
/// });
/// let rows: Vec<_> = captured.extract().into_iter().flat_map(|(_, rows)| rows).collect();
/// assert_eq!(rows.len(), 7);
/// assert!(rows.contains(&(5, None, Some('x'))));
/// ```
pub trait IbJoin<'s, T: Timestamp, K: JoinKey, L: ExchangeData + Clone> {
    /// Joins with `small` as the broadcast side and calls `logic(key, left, right, out)` once
    /// per output row.
    fn ib_join_with<R, D, F>(
        self,
        right: StreamVec<'s, T, (K, R)>,
        how: JoinType,
        small: Side,
        config: &JoinConfig,
        logic: F,
    ) -> StreamVec<'s, T, D>
    where
        R: ExchangeData + Clone,
        D: Clone + 'static,
        F: FnMut(&K, Option<&L>, Option<&R>, &mut Vec<D>) + 'static;

    /// Joins with `small` as the broadcast side and emits `(key, left, right)` rows.
    fn ib_join<R>(
        self,
        right: StreamVec<'s, T, (K, R)>,
        how: JoinType,
        small: Side,
        config: &JoinConfig,
    ) -> StreamVec<'s, T, JoinedRow<K, L, R>>
    where
        R: ExchangeData + Clone,
        Self: Sized,
    {
        self.ib_join_with(right, how, small, config, |key, left, right, out| {
            out.push((key.clone(), left.cloned(), right.cloned()))
        })
    }
}

impl<'s, T, K, L> IbJoin<'s, T, K, L> for StreamVec<'s, T, (K, L)>
where
    T: Timestamp,
    K: JoinKey,
    L: ExchangeData + Clone,
{
    fn ib_join_with<R, D, F>(
        self,
        right: StreamVec<'s, T, (K, R)>,
        how: JoinType,
        small: Side,
        config: &JoinConfig,
        logic: F,
    ) -> StreamVec<'s, T, D>
    where
        R: ExchangeData + Clone,
        D: Clone + 'static,
        F: FnMut(&K, Option<&L>, Option<&R>, &mut Vec<D>) + 'static,
    {
        let scope = self.scope();
        let partitioning = config.partitioning(scope.peers());
        // Each record's home is the next of this worker's partitions: the large side stays.
        let mut spread_left = RoundRobin::local(&partitioning, scope.index());
        let mut spread_right = spread_left.clone();
        ib_join_in_place(
            self,
            right,
            how,
            small,
            partitioning,
            (
                Box::new(move |_, _| spread_left.next_partition()),
                Box::new(move |_, _| spread_right.next_partition()),
            ),
            config.loads.clone(),
            each_row(logic),
        )
    }
}

/// The routing rule for the small side: non-NULL keys are broadcast; NULL keys match nothing, so
/// they go to `home` (a partition of their own) when the join keeps unmatched small rows and are
/// dropped otherwise. Those are the only "own" small-side records IB-Join expects.
pub fn index_rule<K: JoinKey, V>(
    home: impl Fn(&K, &V) -> u32 + 'static,
    keep_nulls: bool,
) -> impl FnMut(&K, &V) -> Route + 'static {
    move |key, value| {
        if key.is_null() {
            if keep_nulls {
                Route::To(home(key, value))
            } else {
                Route::Drop
            }
        } else {
            Route::Broadcast
        }
    }
}

/// IB-Join over routed inputs: the `small` side must be broadcast (its NULL-keyed rows, if kept,
/// routed to a partition; see [`index_rule`]), the other side routed to partitions (any rule:
/// each large record is probed where it lands).
pub fn ib_join_routed<'s, T, K, L, R, D, F>(
    left: StreamVec<'s, T, Routed<K, L>>,
    right: StreamVec<'s, T, Routed<K, R>>,
    how: JoinType,
    small: Side,
    partitioning: Partitioning,
    loads: LoadRecorder,
    logic: F,
) -> StreamVec<'s, T, D>
where
    T: Timestamp,
    K: JoinKey,
    L: ExchangeData + Clone,
    R: ExchangeData + Clone,
    D: Clone + 'static,
    F: FnMut(&K, Option<&L>, Option<&R>, &mut Vec<D>) + 'static,
{
    match small {
        Side::Left => ib_core(
            left,
            routed_large(right),
            how,
            small,
            TrackingMode::Ib,
            by_key,
            partitioning,
            loads,
            each_row(logic),
        ),
        Side::Right => ib_core(
            right,
            routed_large(left),
            how,
            small,
            TrackingMode::Ib,
            by_key,
            partitioning,
            loads,
            Swapped(each_row(logic)),
        ),
    }
}

/// IB-Join whose large side stays where it is: the `small` side is broadcast as an index (its
/// NULL-keyed rows, when kept, go to their home), and each large record is probed on the worker
/// that holds it, with no routing operator and no exchange, counted under its home partition.
/// `homes` name each record's partition and must name one of the worker the record enters on,
/// as they do when every worker feeds the rows of its own partitions. With fewer partitions
/// than workers some workers host none, and their large records are exchanged to their homes.
#[allow(clippy::too_many_arguments)]
pub fn ib_join_in_place<'s, T, K, L, R, D, F>(
    left: StreamVec<'s, T, (K, L)>,
    right: StreamVec<'s, T, (K, R)>,
    how: JoinType,
    small: Side,
    partitioning: Partitioning,
    homes: (HomeFn<K, L>, HomeFn<K, R>),
    loads: LoadRecorder,
    logic: F,
) -> StreamVec<'s, T, D>
where
    T: Timestamp,
    K: JoinKey,
    L: ExchangeData + Clone,
    R: ExchangeData + Clone,
    D: Clone + 'static,
    F: JoinLogic<K, L, R, D> + 'static,
{
    let (mut home_left, mut home_right) = homes;
    let keep_left = how.keeps_unmatched(Side::Left);
    let keep_right = how.keeps_unmatched(Side::Right);
    match small {
        Side::Left => ib_with_home(
            route(
                left,
                "IndexLeft",
                index_rule_mut(move |k: &K, v: &L| home_left(k, v), keep_left),
            ),
            right,
            home_right,
            keep_right,
            how,
            small,
            TrackingMode::Ib,
            by_key,
            partitioning,
            loads,
            logic,
        ),
        Side::Right => ib_with_home(
            route(
                right,
                "IndexRight",
                index_rule_mut(move |k: &K, v: &R| home_right(k, v), keep_right),
            ),
            left,
            home_left,
            keep_left,
            how,
            small,
            TrackingMode::Ib,
            by_key,
            partitioning,
            loads,
            Swapped(logic),
        ),
    }
}

/// [`index_rule`] for a home that may keep state (a round-robin).
fn index_rule_mut<K: JoinKey, V>(
    mut home: impl FnMut(&K, &V) -> u32 + 'static,
    keep_nulls: bool,
) -> impl FnMut(&K, &V) -> Route + 'static {
    move |key, value| {
        if key.is_null() {
            if keep_nulls {
                Route::To(home(key, value))
            } else {
                Route::Drop
            }
        } else {
            Route::Broadcast
        }
    }
}

/// [`ib_core`] with the large side kept in place when every worker hosts a partition, and
/// exchanged to `home` otherwise.
#[allow(clippy::too_many_arguments)]
fn ib_with_home<'s, T, K, S, G, D, F>(
    small_routed: StreamVec<'s, T, Routed<K, S>>,
    large: StreamVec<'s, T, (K, G)>,
    home: HomeFn<K, G>,
    keep_large: bool,
    how: JoinType,
    small: Side,
    mode: TrackingMode,
    order: fn(&mut [(K, S)]),
    partitioning: Partitioning,
    loads: LoadRecorder,
    logic: F,
) -> StreamVec<'s, T, D>
where
    T: Timestamp,
    K: JoinKey,
    S: ExchangeData + Clone,
    G: ExchangeData + Clone,
    D: Clone + 'static,
    F: JoinLogic<K, S, G, D> + 'static,
{
    if partitioning.partitions() >= partitioning.workers() {
        ib_core(
            small_routed,
            in_place_large(large, home, keep_large),
            how,
            small,
            mode,
            order,
            partitioning,
            loads,
            logic,
        )
    } else {
        let routed = route(large, "StayLarge", home_rule(home, keep_large));
        ib_core(
            small_routed,
            routed_large(routed),
            how,
            small,
            mode,
            order,
            partitioning,
            loads,
            logic,
        )
    }
}

/// The DER or DDR baseline (`mode`) over unrouted inputs: small rows are tagged with a row id
/// unique across workers (`sequence * W + worker`, so every worker orders a key's rows the same
/// way), then broadcast; large rows go to `home_large` (NULL keys dropped unless kept), small
/// NULL-keyed rows, when kept, to `home_small`. IB-Join itself needs no row ids: use
/// [`ib_join_routed`] for [`TrackingMode::Ib`].
#[allow(clippy::too_many_arguments)]
pub fn baseline_join<'s, T, K, L, R, D, F>(
    left: StreamVec<'s, T, (K, L)>,
    right: StreamVec<'s, T, (K, R)>,
    how: JoinType,
    small: Side,
    mode: TrackingMode,
    partitioning: Partitioning,
    homes: (HomeFn<K, L>, HomeFn<K, R>),
    loads: LoadRecorder,
    mut logic: F,
) -> StreamVec<'s, T, D>
where
    T: Timestamp,
    K: JoinKey,
    L: ExchangeData + Clone,
    R: ExchangeData + Clone,
    D: Clone + 'static,
    F: FnMut(&K, Option<&L>, Option<&R>, &mut Vec<D>) + 'static,
{
    let (home_left, home_right) = homes;
    let keep_left = how.keeps_unmatched(Side::Left);
    let keep_right = how.keeps_unmatched(Side::Right);
    match small {
        Side::Left => ib_with_home(
            route(tag_rows(left), "TagLeft", tagged_rule(home_left, keep_left)),
            right,
            home_right,
            keep_right,
            how,
            small,
            mode,
            by_key_and_id,
            partitioning,
            loads,
            each_row(
                move |key: &K, s: Option<&(u64, L)>, g: Option<&R>, out: &mut Vec<D>| {
                    logic(key, s.map(|s| &s.1), g, out)
                },
            ),
        ),
        Side::Right => ib_with_home(
            route(
                tag_rows(right),
                "TagRight",
                tagged_rule(home_right, keep_right),
            ),
            left,
            home_left,
            keep_left,
            how,
            small,
            mode,
            by_key_and_id,
            partitioning,
            loads,
            each_row(
                move |key: &K, s: Option<&(u64, R)>, g: Option<&L>, out: &mut Vec<D>| {
                    logic(key, g, s.map(|s| &s.1), out)
                },
            ),
        ),
    }
}

/// The partition a record starts in (its home); may be stateful, such as a round-robin.
pub type HomeFn<K, V> = Box<dyn FnMut(&K, &V) -> u32>;

fn home_rule<K: JoinKey, V: 'static>(
    mut home: HomeFn<K, V>,
    keep_nulls: bool,
) -> impl FnMut(&K, &V) -> Route + 'static {
    move |key, value| {
        if key.is_null() && !keep_nulls {
            Route::Drop
        } else {
            Route::To(home(key, value))
        }
    }
}

fn tagged_rule<K: JoinKey, V: 'static>(
    mut home: HomeFn<K, V>,
    keep_nulls: bool,
) -> impl FnMut(&K, &(u64, V)) -> Route + 'static {
    move |key, value| {
        if key.is_null() {
            if keep_nulls {
                Route::To(home(key, &value.1))
            } else {
                Route::Drop
            }
        } else {
            Route::Broadcast
        }
    }
}

/// Tags each row with an id unique across workers.
fn tag_rows<'s, T: Timestamp, K: JoinKey, V: ExchangeData + Clone>(
    stream: StreamVec<'s, T, (K, V)>,
) -> StreamVec<'s, T, (K, (u64, V))> {
    let workers = stream.scope().peers() as u64;
    let worker = stream.scope().index() as u64;
    let mut sequence = 0u64;
    stream.unary(Pipeline, "TagRows", move |_, _| {
        move |input, output| {
            input.for_each_stamp(|cap, data| {
                let mut session = output.session(&cap);
                for batch in data {
                    for (key, value) in batch.drain(..) {
                        session.give((key, (sequence * workers + worker, value)));
                        sequence += 1;
                    }
                }
            });
        }
    })
}

/// A run of `len` consecutive large records of a batch counted under local slot `slot`
/// ([`DROPPED`] for records that take no part: NULL keys the join does not keep).
type Run = (u32, u32);

/// The slot of large records that are not probed.
const DROPPED: u32 = u32::MAX;

/// Per-time state of the probe on one worker.
struct Probe<K, S, X> {
    small_own: Vec<Vec<(K, S)>>,
    /// The large side's batches as they arrived, with the partition of each run of records:
    /// keeping timely's containers saves copying every large record once more, and inputs fed
    /// partition by partition make one run per batch.
    large_batches: Vec<(Vec<X>, Vec<Run>)>,
    /// Large records held per local slot, for the load counters.
    large_held: Vec<u64>,
    broadcast: Vec<(K, S)>,
}

/// Probes waiting for their inputs to complete, with a capability for their time.
type PendingProbes<T, K, S, X> = Vec<(Capability<T>, Probe<K, S, X>)>;

/// Index kept for the tracking operator of the same worker, per time.
type SharedIndexes<T, K, S> = Rc<RefCell<Vec<(T, Rc<Index<K, S>>)>>>;

/// The large side of [`ib_core`]: records of type `X` arriving through `pact`, `place(record)`
/// naming the local partition each is counted under (`None`: it takes no part), `view` its key
/// and value.
pub(crate) struct LargeInput<'s, T: Timestamp, K, G, X, P, H> {
    stream: StreamVec<'s, T, X>,
    pact: P,
    place: H,
    view: fn(&X) -> (&K, &G),
}

/// A large side already routed to partitions, exchanged to their workers.
#[allow(clippy::type_complexity)]
fn routed_large<'s, T: Timestamp, K: JoinKey, G: ExchangeData>(
    stream: StreamVec<'s, T, Routed<K, G>>,
) -> LargeInput<
    's,
    T,
    K,
    G,
    Routed<K, G>,
    Exchange<Routed<K, G>, impl FnMut(&Routed<K, G>) -> u64 + 'static>,
    impl FnMut(&Routed<K, G>) -> Option<u32> + 'static,
> {
    LargeInput {
        stream,
        pact: Exchange::new(|record: &Routed<K, G>| record.0.exchange_hash()),
        place: |record: &Routed<K, G>| {
            Some(
                record
                    .0
                    .as_partition()
                    .expect("IB-Join never broadcasts the large side"),
            )
        },
        view: |record| (&record.1 .0, &record.1 .1),
    }
}

/// A large side that stays where it is: no routing operator and no exchange, each record
/// probed on the worker that holds it and counted under `home(key, value)`, which must be a
/// partition of that worker. NULL keys take no part unless kept.
#[allow(clippy::type_complexity)]
fn in_place_large<'s, T: Timestamp, K: JoinKey, G: ExchangeData>(
    stream: StreamVec<'s, T, (K, G)>,
    mut home: HomeFn<K, G>,
    keep_nulls: bool,
) -> LargeInput<'s, T, K, G, (K, G), Pipeline, impl FnMut(&(K, G)) -> Option<u32> + 'static> {
    LargeInput {
        stream,
        pact: Pipeline,
        place: move |(key, value): &(K, G)| {
            (keep_nulls || !key.is_null()).then(|| home(key, value))
        },
        view: |record| (&record.0, &record.1),
    }
}

/// IB-Join with the small side `S` and the large side `G`, handing output rows to `logic` as
/// `(key, small, large)`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn ib_core<'s, T, K, S, G, X, P, H, D, F>(
    small_stream: StreamVec<'s, T, Routed<K, S>>,
    large: LargeInput<'s, T, K, G, X, P, H>,
    how: JoinType,
    small: Side,
    mode: TrackingMode,
    order: fn(&mut [(K, S)]),
    partitioning: Partitioning,
    loads: LoadRecorder,
    logic: F,
) -> StreamVec<'s, T, D>
where
    T: Timestamp,
    K: JoinKey,
    S: ExchangeData + Clone,
    G: ExchangeData + Clone,
    X: Clone + 'static,
    P: ParallelizationContract<T, Vec<X>>,
    H: FnMut(&X) -> Option<u32> + 'static,
    D: Clone + 'static,
    F: JoinLogic<K, S, G, D> + 'static,
{
    let LargeInput {
        stream: large_stream,
        pact: large_pact,
        mut place,
        view,
    } = large;
    let large = small.other();
    let worker = small_stream.scope().index();
    assert_eq!(
        partitioning.workers(),
        small_stream.scope().peers(),
        "the partitioning must be made for this computation's worker count"
    );
    let local = partitioning.local_partitions(worker);
    for &partition in &local {
        loads.register(partition);
    }
    let slots = local.len();
    let tracks = how.tracks_matches(small);
    let keep_small = how.keeps_unmatched(small);
    let semi_small = how.semi_side() == Some(small);
    let keep_large = how.keeps_unmatched(large);
    let semi_large = how.semi_side() == Some(large);
    let pairs = how.emits_pairs();
    let logic = Rc::new(RefCell::new(logic));
    let indexes: SharedIndexes<T, K, S> = Rc::new(RefCell::new(Vec::new()));
    let row_bytes = std::mem::size_of::<(K, S)>() as u64;

    let probe_logic = Rc::clone(&logic);
    let probe_loads = loads.clone();
    let probe_indexes = Rc::clone(&indexes);
    let probe_local = local.clone();
    let probe_scope = small_stream.scope();
    let probed: StreamVec<'s, T, Result<D, Tracking<K, S>>> = small_stream.binary_frontier(
        large_stream,
        Exchange::new(|record: &Routed<K, S>| record.0.exchange_hash()),
        large_pact,
        "IbProbe",
        move |_capability, info| {
            let local = probe_local;
            let loads = probe_loads;
            let activator = probe_scope.activator_for(info.address);
            let mut pending: PendingProbes<T, K, S, X> = Vec::new();
            let mut ready: Vec<ProbeJob<T, K, S, X>> = Vec::new();
            let mut out: Vec<D> = Vec::with_capacity(OUTPUT_BATCH);
            let mut received = vec![0u64; slots];
            move |(input_small, frontier_small), (input_large, frontier_large), output| {
                input_small.for_each_stamp(|stamp, data| {
                    let time = stamp_time(&stamp);
                    let state = probe_state(&mut pending, &time, || stamp.delayed(&time, 0), slots);
                    for batch in data {
                        let mut broadcasts = 0u64;
                        for (dest, record) in batch.drain(..) {
                            match dest.as_partition() {
                                Some(partition) => {
                                    loads.receive(partition, 1);
                                    state.small_own[partitioning.slot(partition)].push(record);
                                }
                                None => {
                                    broadcasts += 1;
                                    state.broadcast.push(record);
                                }
                            }
                        }
                        for &partition in &local {
                            if broadcasts > 0 {
                                loads.receive(partition, broadcasts);
                                loads.broadcast(partition, broadcasts, broadcasts * row_bytes);
                            }
                        }
                    }
                });
                input_large.for_each_stamp(|stamp, data| {
                    let time = stamp_time(&stamp);
                    let state = probe_state(&mut pending, &time, || stamp.delayed(&time, 0), slots);
                    for batch in data {
                        // One counter update per partition and batch, not per record.
                        received.iter_mut().for_each(|count| *count = 0);
                        let mut runs: Vec<Run> = Vec::new();
                        for record in batch.iter() {
                            let slot = match place(record) {
                                Some(partition) => {
                                    assert_eq!(
                                        partitioning.owner(partition),
                                        worker,
                                        "IB-Join probes a large record where it is: its partition must be this worker's"
                                    );
                                    let slot = partitioning.slot(partition);
                                    received[slot] += 1;
                                    slot as u32
                                }
                                None => DROPPED,
                            };
                            match runs.last_mut() {
                                Some((last, len)) if *last == slot => *len += 1,
                                _ => runs.push((slot, 1)),
                            }
                        }
                        for (slot, &count) in received.iter().enumerate() {
                            if count > 0 {
                                loads.receive(local[slot], count);
                                state.large_held[slot] += count;
                            }
                        }
                        state.large_batches.push((std::mem::take(batch), runs));
                    }
                });

                let mut index = 0;
                while index < pending.len() {
                    let time = pending[index].0.time();
                    if frontier_small.less_equal(time) || frontier_large.less_equal(time) {
                        index += 1;
                        continue;
                    }
                    let (capability, state) = pending.swap_remove(index);
                    ready.push(ProbeJob::new(capability, state, order, mode, tracks));
                }

                // At most OUTPUT_BUDGET rows this activation: a probe stops where the budget
                // runs out, inside a hot key's small rows if need be, and goes on next time.
                let mut budget = OUTPUT_BUDGET;
                while let Some(job) = ready.first_mut() {
                    let mut session = output.session(&job.capability);
                    let mut logic = probe_logic.borrow_mut();
                    let mut emit = ProbeOutput {
                        logic: &mut *logic,
                        produced: std::mem::take(&mut job.produced),
                        give: |out: &mut Vec<D>| session.give_iterator(out.drain(..).map(Ok)),
                    };
                    let table = Rc::clone(&job.table);
                    let finished = 'probe: {
                        // Small rows with NULL keys match nothing; they are here only when kept.
                        if keep_small {
                            while job.null_slot < job.small_own.len() {
                                let rows = &job.small_own[job.null_slot];
                                while job.null_row < rows.len() {
                                    if budget == 0 {
                                        break 'probe false;
                                    }
                                    let (key, s) = &rows[job.null_row];
                                    emit.row(job.null_slot, key, Some(s), None, &mut out);
                                    budget -= 1;
                                    job.null_row += 1;
                                }
                                job.null_slot += 1;
                                job.null_row = 0;
                            }
                        }
                        // One pass over the large batches as they arrived, each record probing
                        // the index directly, a batch of keys at a time so that their cache
                        // misses overlap; a batch is freed as soon as it has been probed.
                        let mut found = [None; GroupedKeys::BATCH];
                        while job.batch < job.large_batches.len() {
                            let (batch, runs) = &job.large_batches[job.batch];
                            while job.run < runs.len() {
                                let (slot, len) = runs[job.run];
                                let run = &batch[job.at..job.at + len as usize];
                                while slot != DROPPED && job.record < run.len() {
                                    let slot = slot as usize;
                                    let end = (job.record + GroupedKeys::BATCH).min(run.len());
                                    let chunk = &run[job.record..end];
                                    let mut keys = [None; GroupedKeys::BATCH];
                                    for (record, key) in chunk.iter().zip(&mut keys) {
                                        *key = Some(view(record).0);
                                    }
                                    table.probe_batch(&keys[..chunk.len()], &mut found);
                                    for (record, group) in chunk.iter().zip(found) {
                                        let (key, g) = view(record);
                                        match group {
                                            None => {
                                                if keep_large {
                                                    if budget == 0 {
                                                        break 'probe false;
                                                    }
                                                    emit.row(slot, key, None, Some(g), &mut out);
                                                    budget -= 1;
                                                }
                                            }
                                            Some(group) => {
                                                if tracks {
                                                    let id = group.id as usize;
                                                    job.matched[slot][id / 64] |= 1 << (id % 64);
                                                }
                                                if pairs {
                                                    // `done` rows of the group given already.
                                                    let smalls = table.rows_of(group);
                                                    while job.done < smalls.len() {
                                                        if budget == 0 {
                                                            break 'probe false;
                                                        }
                                                        let take = (smalls.len() - job.done)
                                                            .min(budget)
                                                            .min(GROUP_PIECE);
                                                        let piece =
                                                            &smalls[job.done..job.done + take];
                                                        emit.pairs(slot, key, piece, g, &mut out);
                                                        job.done += take;
                                                        budget -= take;
                                                    }
                                                } else if semi_large {
                                                    if budget == 0 {
                                                        break 'probe false;
                                                    }
                                                    emit.row(slot, key, None, Some(g), &mut out);
                                                    budget -= 1;
                                                }
                                            }
                                        }
                                        job.record += 1;
                                        job.done = 0;
                                    }
                                }
                                job.at += len as usize;
                                job.run += 1;
                                job.record = 0;
                            }
                            job.large_batches[job.batch] = (Vec::new(), Vec::new());
                            job.batch += 1;
                            job.run = 0;
                            job.at = 0;
                        }
                        true
                    };
                    job.produced = emit.produced;
                    // What is gathered goes out now: the next activation may be another time's.
                    if !out.is_empty() {
                        session.give_iterator(out.drain(..).map(Ok));
                    }
                    if !finished {
                        drop(session);
                        activator.activate();
                        break;
                    }
                    for (slot, &partition) in local.iter().enumerate() {
                        let held = job.small_own[slot].len() as u64
                            + job.large_held[slot]
                            + job.broadcast_held;
                        loads.output(partition, job.produced[slot]);
                        loads.release(partition, held);
                        let matched = if tracks { &job.matched[slot][..] } else { &[][..] };
                        if tracks {
                            // Every partition tells every owner of a non-empty range, even when it
                            // matched nothing there: the message is what gives the owner a
                            // capability at this time, and its payload is then empty.
                            let mut sent = 0u64;
                            let mut bytes = 0u64;
                            for owner in 0..partitioning.partitions() as u32 {
                                let range = id_range(&partitioning, owner, job.ids_tracked);
                                if range.is_empty() {
                                    continue;
                                }
                                let is_matched = |row: usize| {
                                    let id = job.row_keys[row] as usize;
                                    matched[id / 64] & (1 << (id % 64)) != 0
                                };
                                let payload = match mode {
                                    TrackingMode::Ib => {
                                        let set = MatchSet::encode(
                                            &slice_bits(matched, range.start, range.len()),
                                            range.len(),
                                        );
                                        bytes += set.bytes();
                                        TrackPayload::Keys(set)
                                    }
                                    TrackingMode::Der => {
                                        let ids: Vec<u32> = range
                                            .clone()
                                            .filter(|&row| !is_matched(row))
                                            .map(|row| (row - range.start) as u32)
                                            .collect();
                                        bytes += ids.len() as u64 * 4;
                                        TrackPayload::RowIds(ids)
                                    }
                                    TrackingMode::Ddr => {
                                        let rows: Vec<(u32, K, S)> = range
                                            .clone()
                                            .filter(|&row| !is_matched(row))
                                            .map(|row| {
                                                let (key, s) = &job.table.rows[row];
                                                ((row - range.start) as u32, key.clone(), s.clone())
                                            })
                                            .collect();
                                        bytes += rows.len() as u64 * (4 + row_bytes);
                                        TrackPayload::Rows(rows)
                                    }
                                };
                                sent += 1;
                                bytes += MESSAGE_HEADER_BYTES;
                                session.give(Err((owner, payload)));
                            }
                            loads.tracking(partition, sent, bytes);
                        }
                    }
                    drop(session);
                    // The owners on this worker will need the rows of their ranges.
                    let owns_ids = local
                        .iter()
                        .any(|&p| !id_range(&partitioning, p, job.ids_tracked).is_empty());
                    if tracks && owns_ids {
                        probe_indexes
                            .borrow_mut()
                            .push((job.capability.time().clone(), Rc::clone(&job.table)));
                    }
                    // Done: its capability goes, and with it the hold on the output frontier.
                    ready.remove(0);
                }
            }
        },
    );

    let (rows, tracking) =
        probed.ok_err::<Vec<D>, D, Vec<Tracking<K, S>>, Tracking<K, S>, _>(|x| x);
    if !tracks {
        return rows;
    }

    let tracked = tracking.unary_frontier(
        Exchange::new(|message: &Tracking<K, S>| message.0 as u64),
        "IbTrack",
        move |_capability, _info| {
            // Per time: the capability and, per local slot, the OR of the received sets.
            let mut pending: Vec<(Capability<T>, Vec<OwnerState>)> = Vec::new();
            let mut out: Vec<D> = Vec::with_capacity(OUTPUT_BATCH);
            move |(input, frontier), output| {
                input.for_each_stamp(|stamp, data| {
                    let time = stamp_time(&stamp);
                    let position = match pending.iter().position(|(cap, _)| *cap.time() == time) {
                        Some(position) => position,
                        None => {
                            pending.push((
                                stamp.delayed(&time, 0),
                                vec![OwnerState::default(); slots],
                            ));
                            pending.len() - 1
                        }
                    };
                    let sets = &mut pending[position].1;
                    for batch in data {
                        for (owner, payload) in batch.drain(..) {
                            let state = &mut sets[partitioning.slot(owner)];
                            match payload {
                                TrackPayload::Keys(set) => {
                                    let needed = match &set {
                                        MatchSet::Bits(words) => words.len(),
                                        MatchSet::Ids(ids) => {
                                            ids.last().map_or(0, |&id| id as usize / 64 + 1)
                                        }
                                    };
                                    if state.bits.len() < needed {
                                        state.bits.resize(needed, 0);
                                    }
                                    set.or_into(&mut state.bits);
                                }
                                TrackPayload::RowIds(ids) => {
                                    state.reports += 1;
                                    for id in ids {
                                        state.count(id);
                                    }
                                }
                                TrackPayload::Rows(rows) => {
                                    state.reports += 1;
                                    for (id, _, _) in rows {
                                        state.count(id);
                                    }
                                }
                            }
                        }
                    }
                });
                let mut index = 0;
                while index < pending.len() {
                    let time = pending[index].0.time();
                    if frontier.less_equal(time) {
                        index += 1;
                        continue;
                    }
                    let (capability, sets) = pending.swap_remove(index);
                    let table = {
                        let mut stored = indexes.borrow_mut();
                        let position = stored
                            .iter()
                            .position(|(t, _)| t == capability.time())
                            .expect("the probe stores the index before its frontier passes");
                        stored.swap_remove(position).1
                    };
                    let keys = table.keys();
                    let mut session = output.session(&capability);
                    let mut logic = logic.borrow_mut();
                    for (slot, &owner) in local.iter().enumerate() {
                        let mut produced = 0u64;
                        let state = &sets[slot];
                        match mode {
                            TrackingMode::Ib => {
                                for (offset, id) in id_range(&partitioning, owner, keys).enumerate()
                                {
                                    let matched = state
                                        .bits
                                        .get(offset / 64)
                                        .is_some_and(|w| w & (1 << (offset % 64)) != 0);
                                    if (matched && semi_small) || (!matched && keep_small) {
                                        for (key, s) in table.group(id) {
                                            produced += 1;
                                            logic.row(key, Some(s), None, &mut out);
                                            if out.len() >= OUTPUT_BATCH {
                                                session.give_container(&mut out);
                                                out.clear();
                                            }
                                        }
                                    }
                                }
                            }
                            TrackingMode::Der | TrackingMode::Ddr => {
                                // A row is unmatched everywhere when every partition that
                                // probed reported it unmatched; every partition probes and
                                // reports to every owner of a non-empty range.
                                let rows = id_range(&partitioning, owner, table.rows.len());
                                assert!(
                                    rows.is_empty()
                                        || state.reports == partitioning.partitions() as u32,
                                    "an owner heard from {} of {} partitions",
                                    state.reports,
                                    partitioning.partitions()
                                );
                                for (offset, row) in rows.enumerate() {
                                    let unmatched = state.counts.get(offset).copied().unwrap_or(0)
                                        == state.reports;
                                    if (!unmatched && semi_small) || (unmatched && keep_small) {
                                        let (key, s) = &table.rows[row];
                                        produced += 1;
                                        logic.row(key, Some(s), None, &mut out);
                                        if out.len() >= OUTPUT_BATCH {
                                            session.give_container(&mut out);
                                            out.clear();
                                        }
                                    }
                                }
                            }
                        }
                        if !out.is_empty() {
                            session.give_container(&mut out);
                            out.clear();
                        }
                        loads.output(owner, produced);
                    }
                }
            }
        },
    );
    rows.concat(tracked)
}

/// A time whose probe inputs are complete, probing a budget of output rows per activation.
struct ProbeJob<T: Timestamp, K, S, X> {
    capability: Capability<T>,
    table: Rc<Index<K, S>>,
    small_own: Vec<Vec<(K, S)>>,
    large_batches: Vec<(Vec<X>, Vec<Run>)>,
    large_held: Vec<u64>,
    broadcast_held: u64,
    /// Ids the owners track: keys (IB-Join) or rows (DER, DDR).
    ids_tracked: usize,
    /// DER, DDR with tracking: the key id of every row.
    row_keys: Vec<u32>,
    /// With tracking: per local slot, a bit per key id that a large record matched.
    matched: Vec<Vec<u64>>,
    /// Output rows per local slot so far.
    produced: Vec<u64>,
    /// Where the probe stands: the slot and row of the kept NULL-key small rows, then the
    /// large batch, its run, the run's first record in the batch, the record in the run, and
    /// the small rows of its key already paired with it.
    null_slot: usize,
    null_row: usize,
    batch: usize,
    run: usize,
    at: usize,
    record: usize,
    done: usize,
}

impl<T: Timestamp, K: JoinKey, S, X> ProbeJob<T, K, S, X> {
    fn new(
        capability: Capability<T>,
        state: Probe<K, S, X>,
        order: fn(&mut [(K, S)]),
        mode: TrackingMode,
        tracks: bool,
    ) -> Self {
        let slots = state.small_own.len();
        let broadcast_held = state.broadcast.len() as u64;
        let table = Rc::new(Index::new(state.broadcast, order));
        let ids_tracked = match mode {
            TrackingMode::Ib => table.keys(),
            TrackingMode::Der | TrackingMode::Ddr => table.rows.len(),
        };
        let row_keys = if tracks && mode != TrackingMode::Ib {
            table.row_keys()
        } else {
            Vec::new()
        };
        let words = table.keys().div_ceil(64);
        let matched = if tracks {
            vec![vec![0u64; words]; slots]
        } else {
            Vec::new()
        };
        ProbeJob {
            capability,
            table,
            small_own: state.small_own,
            large_batches: state.large_batches,
            large_held: state.large_held,
            broadcast_held,
            ids_tracked,
            row_keys,
            matched,
            produced: vec![0; slots],
            null_slot: 0,
            null_row: 0,
            batch: 0,
            run: 0,
            at: 0,
            record: 0,
            done: 0,
        }
    }
}

/// What the owner of one range has received at one time.
#[derive(Clone, Debug, Default)]
struct OwnerState {
    /// IB-Join: the OR of the matched key-id sets.
    bits: Vec<u64>,
    /// DER, DDR: per row of the range, how many partitions reported it unmatched.
    counts: Vec<u32>,
    /// DER, DDR: how many partitions reported.
    reports: u32,
}

impl OwnerState {
    fn count(&mut self, id: u32) {
        let id = id as usize;
        if self.counts.len() <= id {
            self.counts.resize(id + 1, 0);
        }
        self.counts[id] += 1;
    }
}

/// The probe's output rows: to `logic`, a small key's rows that match one large record as one
/// group, counted per local partition slot; `give` hands `out` to the stream whenever it holds
/// [`OUTPUT_BATCH`] records or more.
struct ProbeOutput<'a, F, Give> {
    logic: &'a mut F,
    produced: Vec<u64>,
    give: Give,
}

impl<F, Give> ProbeOutput<'_, F, Give> {
    #[inline]
    fn row<K, S, G, D>(
        &mut self,
        slot: usize,
        key: &K,
        s: Option<&S>,
        g: Option<&G>,
        out: &mut Vec<D>,
    ) where
        F: JoinLogic<K, S, G, D>,
        Give: FnMut(&mut Vec<D>),
    {
        self.produced[slot] += 1;
        self.logic.row(key, s, g, out);
        if out.len() >= OUTPUT_BATCH {
            (self.give)(out);
        }
    }

    /// Every row of `smalls` (rows of `key`) paired with the large record `g`.
    #[inline]
    fn pairs<K, S, G, D>(
        &mut self,
        slot: usize,
        key: &K,
        smalls: &[(K, S)],
        g: &G,
        out: &mut Vec<D>,
    ) where
        F: JoinLogic<K, S, G, D>,
        Give: FnMut(&mut Vec<D>),
    {
        self.produced[slot] += smalls.len() as u64;
        self.logic
            .lefts_with(key, smalls.iter().map(|(_, s)| s), g, out);
        if out.len() >= OUTPUT_BATCH {
            (self.give)(out);
        }
    }
}

/// The bits `[start, start + len)` of `bits`, shifted to start at bit 0.
fn slice_bits(bits: &[u64], start: usize, len: usize) -> Vec<u64> {
    let mut out = vec![0u64; len.div_ceil(64)];
    for offset in 0..len {
        let bit = start + offset;
        if bits[bit / 64] & (1 << (bit % 64)) != 0 {
            out[offset / 64] |= 1 << (offset % 64);
        }
    }
    out
}

/// The time a message's records are joined at (the least element of its stamp).
fn stamp_time<T: Timestamp>(stamp: &timely::dataflow::operators::InputCapability<T>) -> T {
    stamp
        .stamp()
        .elements()
        .first()
        .expect("IB-Join inputs must carry timestamps")
        .clone()
}

fn probe_state<'a, T: Timestamp, K, S, X>(
    pending: &'a mut PendingProbes<T, K, S, X>,
    time: &T,
    retain: impl FnOnce() -> Capability<T>,
    slots: usize,
) -> &'a mut Probe<K, S, X> {
    let index = match pending.iter().position(|(cap, _)| cap.time() == time) {
        Some(index) => index,
        None => {
            pending.push((
                retain(),
                Probe {
                    small_own: (0..slots).map(|_| Vec::new()).collect(),
                    large_batches: Vec::new(),
                    large_held: vec![0; slots],
                    broadcast: Vec::new(),
                },
            ));
            pending.len() - 1
        }
    };
    &mut pending[index].1
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
