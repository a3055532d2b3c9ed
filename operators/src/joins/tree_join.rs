//! Tree-Join (basic, iterative form): for keys hot in both inputs, whose `n_L x n_R` block no
//! single partition should produce.
//!
//! Records circulate in a timely loop (an iterative scope with a feedback edge) as *joined-index
//! entries* `(partition, key, place, L-list, R-list)`. Round 0 groups the input by key (one entry
//! per key, on the partition of its hash) and resolves every entry with an empty side at once:
//! padded for outer joins, emitted for anti joins, dropped otherwise; semi and anti joins are
//! finished there too, since every record of an entry with both sides is matched. From then on
//! only pairs remain, so no later round pads or deduplicates. Every round, an entry whose lists
//! both hold at most `leaf` records is a *leaf* and emits its L-list x R-list; a larger entry is
//! split: each list longer than `leaf` is cut into `fanout` sub-lists, and every (L sub-list,
//! R sub-list) pair becomes a new entry, sent through the feedback edge to another partition for
//! the next round. Every pair is produced exactly once, in `1 + ceil(log_fanout(n_max / leaf))`
//! rounds for a key whose longer list has `n_max` records.
//!
//! Sub-entries are placed by subdividing the ring of partitions, not by a random hash: an entry
//! owns an arc of the ring (a round-0 entry all of it, starting at its own partition), and its `n`
//! sub-entries get equal consecutive sub-arcs, each going to the partition where its arc starts.
//! The `n` equal pieces of an entry therefore land `P / n` partitions apart, and entries of equal
//! size (a planner's grid cells) spread evenly instead of colliding by chance.
//!
//! ```
//! use skewjoin_operators::tree_join::{TreeJoin, TreeParams};
//! use skewjoin_operators::{JoinConfig, JoinType};
//! use timely::dataflow::operators::{Capture, ToStream};
//! use timely::dataflow::operators::capture::Extract;
//!
//! let captured = timely::example(|scope| {
//!     let left = (0..30u32).map(|i| (1u64, i)).chain([(2, 99)]).to_stream(scope).container::<Vec<_>>();
//!     let right = (0..20u32).map(|i| (1u64, i)).to_stream(scope).container::<Vec<_>>();
//!     let params = TreeParams { leaf: 4, fanout: 2 };
//!     left.tree_join(right, JoinType::Left, params, &JoinConfig::new()).capture()
//! });
//! let rows: Vec<_> = captured.extract().into_iter().flat_map(|(_, rows)| rows).collect();
//! assert_eq!(rows.len(), 30 * 20 + 1);
//! assert!(rows.contains(&(2, Some(99), None)));
//! ```

use std::cell::Cell;
use std::collections::HashMap;
use std::rc::Rc;

use serde::{Deserialize, Serialize};
use timely::container::CapacityContainerBuilder;
use timely::dataflow::channels::pact::Exchange;
use timely::dataflow::operators::generic::builder_rc::OperatorBuilder;
use timely::dataflow::operators::generic::OutputBuilder;
use timely::dataflow::operators::vec::Map;
use timely::dataflow::operators::{Capability, Concat, ConnectLoop, Enter, Feedback, Leave};
use timely::dataflow::StreamVec;
use timely::order::Product;
use timely::progress::Timestamp;
use timely::ExchangeData;

use crate::join_logic::JoinLogic;
use crate::join_type::{JoinType, Side};
use crate::joins::extension::join_extension;
use crate::kernel::GROUP_PIECE;
use crate::key::JoinKey;
use crate::load::LoadRecorder;
use crate::partition::Partitioning;
use crate::partitioned_join::{OUTPUT_BATCH, OUTPUT_BUDGET};
use crate::route::{null_aware, Destination, Route};

/// Tree-Join's shape: leaf size `c` and fan-out `f`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TreeParams {
    /// An entry whose lists both hold at most this many records is a leaf (at most `leaf^2`
    /// output rows, produced in one go).
    pub leaf: u32,
    /// A list longer than `leaf` is cut into this many sub-lists per round (at least 2).
    pub fanout: u32,
}

impl Default for TreeParams {
    /// Leaves of up to 1024 x 1024 (a million pairs: big enough to amortise a round, small
    /// enough to balance), halving-and-more with a fan-out of 4.
    fn default() -> Self {
        TreeParams {
            leaf: 1024,
            fanout: 4,
        }
    }
}

impl TreeParams {
    /// The rounds a key whose longer list has `n_max` records takes: `1 + ceil(log_f(n_max/c))`.
    pub fn rounds_for(&self, n_max: u64) -> u32 {
        let (leaf, fanout) = (self.leaf.max(1) as u64, self.fanout.max(2) as u64);
        let mut rounds = 1;
        let mut size = n_max;
        while size > leaf {
            size = size.div_ceil(fanout);
            rounds += 1;
        }
        rounds
    }
}

/// Counts the rounds a worker's Tree-Join ran (the largest round index seen, plus one).
#[derive(Clone, Debug, Default)]
pub struct TreeRounds(Rc<Cell<u32>>);

impl TreeRounds {
    /// A fresh counter.
    pub fn new() -> TreeRounds {
        TreeRounds::default()
    }
    /// Rounds seen so far.
    pub fn get(&self) -> u32 {
        self.0.get()
    }
    fn saw(&self, round: u32) {
        self.0.set(self.0.get().max(round + 1));
    }
}

/// A joined-index entry: its partition, key, arc of the ring of partitions (start and length,
/// fixed point with 32 fraction bits), lists.
type Entry<K, L, R> = (u32, K, (u64, u64), Vec<L>, Vec<R>);

/// The arc of a round-0 entry on `partition`: the whole ring, starting there.
fn whole_ring(partitioning: &Partitioning, partition: u32) -> (u64, u64) {
    (
        (partition as u64) << 32,
        (partitioning.partitions() as u64) << 32,
    )
}

/// Entries gathered for one time of the loop, with capabilities for the entries output and the
/// rows output.
type Pending<T, K, L, R> = ((Capability<T>, Capability<T>), Vec<Entry<K, L, R>>);

join_extension! {
    /// Tree-Join as an extension trait on streams of `(key, value)` pairs.
    pub trait TreeJoin {
        /// Joins, calling `logic(key, left, right, out)` once per output row.
        fn tree_join_with;
        /// Joins and emits `(key, left, right)` rows.
        fn tree_join;
    }
    params(params: TreeParams);
    built_by |left, right, how, config, logic| {
        let partitioning = config.partitioning(left.scope().peers());
        tree_join(
            left,
            right,
            how,
            partitioning,
            params,
            |_: &K| None,
            config.loads.clone(),
            TreeRounds::new(),
            logic,
        )
    };
}

/// Tree-Join of `left` and `right` over `partitioning`, counting load into `loads` and rounds
/// into `rounds`, handing every output row to `logic` (a leaf's pairs one row of the left with
/// the whole right list at a time).
///
/// `place(key)` may choose the partition of a key's round-0 entry (a planner that knows the
/// entries' sizes places them to balance load: the load-balanced form, whose keys are grid
/// cells); `None` uses the key's hash (the basic form). Later rounds place sub-entries by
/// subdividing the ring from there (see the module documentation).
#[allow(clippy::too_many_arguments)]
pub fn tree_join<'s, T, K, L, R, D, F>(
    left: StreamVec<'s, T, (K, L)>,
    right: StreamVec<'s, T, (K, R)>,
    how: JoinType,
    partitioning: Partitioning,
    params: TreeParams,
    place: impl Fn(&K) -> Option<u32> + Clone + 'static,
    loads: LoadRecorder,
    rounds: TreeRounds,
    mut logic: F,
) -> StreamVec<'s, T, D>
where
    T: Timestamp,
    K: JoinKey,
    L: ExchangeData + Clone,
    R: ExchangeData + Clone,
    D: Clone + 'static,
    F: JoinLogic<K, L, R, D> + 'static,
{
    let scope = left.scope();
    let worker = scope.index();
    let local = partitioning.local_partitions(worker);
    for &partition in &local {
        loads.register(partition);
    }
    let leaf = params.leaf.max(1) as usize;
    let fanout = params.fanout.max(2) as usize;

    // Singleton entries, each on its round-0 partition.
    let mut home_left = round_zero(
        partitioning,
        worker,
        how.keeps_unmatched(Side::Left),
        place.clone(),
    );
    let left = left.flat_map(move |(key, value)| {
        let partition = home_left(&key, &value).single()?;
        let arc = whole_ring(&partitioning, partition);
        Some((partition, key, arc, vec![value], Vec::new()))
    });
    let mut home_right = round_zero(
        partitioning,
        worker,
        how.keeps_unmatched(Side::Right),
        place,
    );
    let right = right.flat_map(move |(key, value)| {
        let partition = home_right(&key, &value).single()?;
        let arc = whole_ring(&partitioning, partition);
        Some((partition, key, arc, Vec::new(), vec![value]))
    });

    scope.iterative::<u32, _, _>(|inner| {
        let (handle, cycle) = inner.feedback(Product::new(Default::default(), 1));
        let entries = left.enter(inner).concat(right.enter(inner)).concat(cycle);
        let pact = Exchange::new(|entry: &Entry<K, L, R>| entry.0 as u64);

        // Two outputs: entries to split go round the loop, rows leave it. One output carrying
        // both, split downstream, had timely's Tee clone every container of rows into the
        // feedback branch only to drop them there: basic Tree-Join took 5.9 GB and 17.7 s of
        // CPU where AM-Join took 1.46 GB and 2.6 s for the same output.
        let mut builder = OperatorBuilder::new("TreeJoinRound".to_owned(), inner);
        let activator = inner.activator_for(builder.operator_info().address);
        let mut input = builder.new_input(entries, pact);
        let (entries_out, entries_stream) = builder.new_output::<Vec<Entry<K, L, R>>>();
        let (rows_out, rows_stream) = builder.new_output::<Vec<D>>();
        let mut entries_out = OutputBuilder::<_, CapacityContainerBuilder<_>>::from(entries_out);
        let mut rows_out = OutputBuilder::<_, CapacityContainerBuilder<_>>::from(rows_out);
        builder.build(move |_capabilities| {
            let mut pending: Vec<Pending<Product<T, u32>, K, L, R>> = Vec::new();
            let mut ready: Vec<Round<Product<T, u32>, K, L, R>> = Vec::new();
            let mut rows: Vec<D> = Vec::with_capacity(OUTPUT_BATCH);
            move |frontiers| {
                input.for_each_stamp(|stamp, data| {
                    let time = stamp
                        .stamp()
                        .elements()
                        .first()
                        .expect("entries carry a timestamp")
                        .clone();
                    let index = match pending.iter().position(|((cap, _), _)| *cap.time() == time) {
                        Some(index) => index,
                        None => {
                            let capabilities = (stamp.delayed(&time, 0), stamp.delayed(&time, 1));
                            pending.push((capabilities, Vec::new()));
                            pending.len() - 1
                        }
                    };
                    for batch in data {
                        for entry in batch.drain(..) {
                            loads.receive(entry.0, (entry.3.len() + entry.4.len()) as u64);
                            pending[index].1.push(entry);
                        }
                    }
                });

                let mut index = 0;
                while index < pending.len() {
                    if frontiers[0].less_equal(pending[index].0 .0.time()) {
                        index += 1;
                        continue;
                    }
                    let (capabilities, entries) = pending.swap_remove(index);
                    let round = capabilities.0.time().inner;
                    rounds.saw(round);
                    let entries = if round == 0 { group(entries) } else { entries };
                    ready.push(Round {
                        capabilities,
                        entries,
                        done: 0,
                    });
                }

                // At most OUTPUT_BUDGET rows this activation; a round resumes where it stopped,
                // inside a leaf if need be.
                let mut budget = OUTPUT_BUDGET;
                let mut entries_handle = entries_out.activate();
                let mut rows_handle = rows_out.activate();
                while let Some(job) = ready.last_mut() {
                    let round = job.capabilities.0.time().inner;
                    let mut entry_session = entries_handle.session(&job.capabilities.0);
                    let mut row_session = rows_handle.session(&job.capabilities.1);
                    let mut give = |rows: &mut Vec<D>| {
                        row_session.give_container(rows);
                        rows.clear();
                    };
                    // Entries are taken from the back, so each one's lists go once it is done.
                    while let Some((partition, key, arc, ls, rs)) = job.entries.last() {
                        let (partition, arc) = (*partition, *arc);
                        let resolved =
                            round == 0 && (ls.is_empty() || rs.is_empty() || !how.emits_pairs());
                        let before = job.done;
                        let held = (ls.len() + rs.len()) as u64;
                        let mut popped = false;
                        let finished = if resolved {
                            // Resolved at once: unmatched rows, semi and anti joins.
                            let matched = !ls.is_empty() && !rs.is_empty();
                            let lefts = if emits_side(how, Side::Left, matched) {
                                ls.len()
                            } else {
                                0
                            };
                            let rights = if emits_side(how, Side::Right, matched) {
                                rs.len()
                            } else {
                                0
                            };
                            while job.done < lefts + rights && budget > 0 {
                                if job.done < lefts {
                                    logic.row(key, Some(&ls[job.done]), None, &mut rows);
                                } else {
                                    logic.row(key, None, Some(&rs[job.done - lefts]), &mut rows);
                                }
                                job.done += 1;
                                budget -= 1;
                                if rows.len() >= OUTPUT_BATCH {
                                    give(&mut rows);
                                }
                            }
                            job.done == lefts + rights
                        } else if ls.len() <= leaf && rs.len() <= leaf {
                            // A leaf's pairs, left row by left row, the right list in pieces:
                            // `done` pairs given means left row done / |R|, right done % |R|.
                            let pairs = ls.len() * rs.len();
                            while job.done < pairs && budget > 0 {
                                let (l, r) = (job.done / rs.len(), job.done % rs.len());
                                let take = (rs.len() - r).min(budget).min(GROUP_PIECE);
                                logic.left_with_rights(
                                    key,
                                    &ls[l],
                                    rs[r..r + take].iter(),
                                    &mut rows,
                                );
                                job.done += take;
                                budget -= take;
                                if rows.len() >= OUTPUT_BATCH {
                                    give(&mut rows);
                                }
                            }
                            job.done == pairs
                        } else {
                            let (_, key, _, ls, rs) = job.entries.pop().expect("an entry");
                            popped = true;
                            for sub in split(&partitioning, &key, arc, ls, rs, leaf, fanout) {
                                entry_session.give(sub);
                            }
                            true
                        };
                        loads.output(partition, (job.done - before) as u64);
                        if !finished {
                            break;
                        }
                        if !popped {
                            job.entries.pop();
                        }
                        loads.release(partition, held);
                        job.done = 0;
                    }
                    // What is gathered goes out now: the next activation may be another time's.
                    if !rows.is_empty() {
                        give(&mut rows);
                    }
                    if !job.entries.is_empty() {
                        activator.activate();
                        break;
                    }
                    drop((entry_session, row_session));
                    // Done: the round's capabilities go, and with them the hold on its outputs.
                    ready.pop();
                }
            }
        });
        entries_stream.connect_loop(handle);
        rows_stream.leave(scope)
    })
}

/// A round of one time whose entries are complete, taken one entry at a time from the back.
struct Round<T: Timestamp, K, L, R> {
    /// For the entries output, then the rows output.
    capabilities: (Capability<T>, Capability<T>),
    entries: Vec<Entry<K, L, R>>,
    /// Output rows of the last entry already handed to the logic.
    done: usize,
}

/// Where a record's round-0 entry goes: to the partition `place` chooses, else that of its key's
/// hash. NULL keys match nothing: they are dropped unless kept (`keep_nulls`), and then spread,
/// since they never group.
fn round_zero<K: JoinKey, V>(
    partitioning: Partitioning,
    worker: usize,
    keep_nulls: bool,
    place: impl Fn(&K) -> Option<u32> + 'static,
) -> impl FnMut(&K, &V) -> Route + 'static {
    let mut spread = worker as u64;
    null_aware(Destination::Home, keep_nulls, move |key: &K, _: &V| {
        place(key).unwrap_or_else(|| entry_partition(&partitioning, key, &mut spread))
    })
}

/// The partition of a key's round-0 entry: its hash's, or round-robin for NULL keys.
fn entry_partition<K: JoinKey>(partitioning: &Partitioning, key: &K, spread: &mut u64) -> u32 {
    if key.is_null() {
        *spread += 1;
        (*spread % partitioning.partitions() as u64) as u32
    } else {
        partitioning.partition_of_hash(key.stable_hash())
    }
}

/// An entry's arc and its records, gathered per (partition, key).
type Gathered<L, R> = ((u64, u64), Vec<L>, Vec<R>);

/// Merges round-0 singletons into one entry per (partition, key); NULL keys stay apart (a NULL
/// matches nothing, not even another NULL).
fn group<K: JoinKey, L, R>(entries: Vec<Entry<K, L, R>>) -> Vec<Entry<K, L, R>> {
    let mut grouped: HashMap<(u32, K), Gathered<L, R>> = HashMap::new();
    let mut out = Vec::new();
    for (partition, key, arc, ls, rs) in entries {
        if key.is_null() {
            out.push((partition, key, arc, ls, rs));
            continue;
        }
        let lists = grouped
            .entry((partition, key))
            .or_insert_with(|| (arc, Vec::new(), Vec::new()));
        lists.1.extend(ls);
        lists.2.extend(rs);
    }
    out.extend(
        grouped
            .into_iter()
            .map(|((partition, key), (arc, ls, rs))| (partition, key, arc, ls, rs)),
    );
    out
}

/// Whether round 0 emits the records of `side` alone, given whether the entry has both sides.
fn emits_side(how: JoinType, side: Side, matched: bool) -> bool {
    if matched {
        how.semi_side() == Some(side)
    } else if how.emits_pairs() {
        how.keeps_unmatched(side)
    } else {
        how.anti_side() == Some(side)
    }
}

/// Cuts an entry into `f_L x f_R` sub-entries (a list no longer than `leaf` stays whole), each
/// with an equal consecutive piece of the entry's arc, on the partition where that piece starts.
fn split<K: JoinKey, L: Clone, R: Clone>(
    partitioning: &Partitioning,
    key: &K,
    arc: (u64, u64),
    ls: Vec<L>,
    rs: Vec<R>,
    leaf: usize,
    fanout: usize,
) -> Vec<Entry<K, L, R>> {
    let chunks = |len: usize| if len > leaf { fanout.min(len) } else { 1 };
    let (fl, fr) = (chunks(ls.len()), chunks(rs.len()));
    let l_parts = cut(ls, fl);
    let r_parts = cut(rs, fr);
    let pieces = (fl * fr) as u64;
    let ring = (partitioning.partitions() as u64) << 32;
    let (start, length) = arc;
    let mut out = Vec::with_capacity(fl * fr);
    for (i, l_part) in l_parts.iter().enumerate() {
        for (j, r_part) in r_parts.iter().enumerate() {
            let piece = (i * fr + j) as u64;
            let sub_start =
                (start + (length as u128 * piece as u128 / pieces as u128) as u64) % ring;
            let sub_arc = (sub_start, (length / pieces).max(1));
            let partition = (sub_start >> 32) as u32;
            out.push((
                partition,
                key.clone(),
                sub_arc,
                l_part.clone(),
                r_part.clone(),
            ));
        }
    }
    out
}

/// Cuts `list` into `parts` contiguous pieces of near-equal length.
fn cut<V>(list: Vec<V>, parts: usize) -> Vec<Vec<V>> {
    let len = list.len();
    let mut out: Vec<Vec<V>> = (0..parts)
        .map(|p| Vec::with_capacity((p + 1) * len / parts - p * len / parts))
        .collect();
    for (index, value) in list.into_iter().enumerate() {
        // Piece p holds indices [p*len/parts, (p+1)*len/parts).
        let piece = ((index + 1) * parts - 1) / len;
        out[piece].push(value);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::join_logic::each_row;
    use crate::reference::{nested_loop_join, JoinedRow};
    use std::sync::{Arc, Mutex};
    use timely::dataflow::operators::{Inspect, ToStream};

    type Rows = Vec<(Option<u64>, u32)>;

    /// Runs Tree-Join on `workers` threads; returns sorted rows and the rounds seen.
    fn run(
        left: &Rows,
        right: &Rows,
        how: JoinType,
        params: TreeParams,
        workers: usize,
        partitions: usize,
    ) -> (Vec<JoinedRow<Option<u64>, u32, u32>>, u32) {
        let out = Arc::new(Mutex::new((Vec::new(), 0u32)));
        let (l, r, o) = (left.clone(), right.clone(), Arc::clone(&out));
        timely::execute(timely::Config::process(workers), move |worker| {
            let (index, peers) = (worker.index(), worker.peers());
            let mine = |rows: &Rows| {
                rows.iter()
                    .enumerate()
                    .filter(|(i, _)| i % peers == index)
                    .map(|(_, r)| *r)
                    .collect::<Vec<_>>()
            };
            let (ml, mr) = (mine(&l), mine(&r));
            let rounds = TreeRounds::new();
            let sink = Arc::clone(&o);
            worker.dataflow::<u32, _, _>(|scope| {
                let left = ml.to_stream(scope).container::<Vec<_>>();
                let right = mr.to_stream(scope).container::<Vec<_>>();
                let partitioning = Partitioning::new(partitions, peers);
                tree_join(
                    left,
                    right,
                    how,
                    partitioning,
                    params,
                    |_: &Option<u64>| None,
                    LoadRecorder::new(),
                    rounds.clone(),
                    each_row(
                        |k: &Option<u64>,
                         l: Option<&u32>,
                         r: Option<&u32>,
                         out: &mut Vec<JoinedRow<Option<u64>, u32, u32>>| {
                            out.push((*k, l.copied(), r.copied()))
                        },
                    ),
                )
                .inspect(move |row| sink.lock().unwrap().0.push(*row));
            });
            while worker.step() {}
            let mut guard = o.lock().unwrap();
            guard.1 = guard.1.max(rounds.get());
        })
        .unwrap();
        let mut guard = out.lock().unwrap();
        guard.0.sort();
        (std::mem::take(&mut guard.0), guard.1)
    }

    fn keys(keys: &[Option<u64>]) -> Rows {
        keys.iter().copied().zip(0..).collect()
    }

    #[test]
    fn every_join_type_matches_the_nested_loop() {
        let mut l = vec![Some(1); 37];
        l.extend([Some(2), Some(3), Some(3), None, Some(5)]);
        let mut r = vec![Some(1); 23];
        r.extend([Some(3), Some(4), None, Some(5)]);
        r.extend([Some(5); 9]);
        let (left, right) = (keys(&l), keys(&r));
        for how in JoinType::ALL {
            let mut expected = nested_loop_join(&left, &right, how);
            expected.sort();
            for (workers, partitions) in [(1, 1), (2, 5), (3, 3), (4, 8)] {
                for params in [
                    TreeParams { leaf: 2, fanout: 2 },
                    TreeParams { leaf: 5, fanout: 3 },
                    TreeParams::default(),
                ] {
                    let (rows, _) = run(&left, &right, how, params, workers, partitions);
                    assert_eq!(
                        rows, expected,
                        "{how} W={workers} P={partitions} {params:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn rounds_follow_the_log_of_the_largest_list() {
        // n_max = 64, c = 4, f = 2: 1 + ceil(log2(16)) = 5 rounds.
        let left = keys(&[Some(9); 64]);
        let right = keys(&[Some(9); 40]);
        let params = TreeParams { leaf: 4, fanout: 2 };
        assert_eq!(params.rounds_for(64), 5);
        let (rows, rounds) = run(&left, &right, JoinType::Inner, params, 2, 4);
        assert_eq!(rows.len(), 64 * 40);
        assert_eq!(rounds, 5);
        // Everything fits a leaf: one round.
        let (_, rounds) = run(
            &left,
            &right,
            JoinType::Inner,
            TreeParams {
                leaf: 64,
                fanout: 2,
            },
            2,
            4,
        );
        assert_eq!(rounds, 1);
        // f = 4: 64 -> 16 -> 4: three rounds.
        let (_, rounds) = run(
            &left,
            &right,
            JoinType::Inner,
            TreeParams { leaf: 4, fanout: 4 },
            3,
            4,
        );
        assert_eq!(rounds, TreeParams { leaf: 4, fanout: 4 }.rounds_for(64));
        assert_eq!(rounds, 3);
    }

    #[test]
    fn cut_keeps_every_record_once() {
        for len in 1..20 {
            for parts in 1..=len.min(6) {
                let pieces = cut((0..len).collect(), parts);
                assert_eq!(pieces.len(), parts);
                assert!(pieces.iter().all(|p| !p.is_empty()));
                assert_eq!(pieces.concat(), (0..len).collect::<Vec<_>>());
            }
        }
    }
}
