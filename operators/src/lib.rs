//! Skew-resistant equi-join operators for [timely dataflow](https://docs.rs/timely).
//!
//! Each strategy is an extension trait on streams of `(key, value)` pairs:
//!
//! - [`ShuffleJoin`]: hash-partition both inputs, join locally (the baseline);
//! - [`BroadcastJoin`]: copy one input to every worker, leave the other in place;
//! - [`IbJoin`]: broadcast a small side as a key index, with unmatched-row tracking by key id,
//!   so that even joins preserving the small side can broadcast it; [`der_join`] and
//!   [`ddr_join`] are the published baselines it is measured against;
//! - VPRP's building blocks: [`sample`] (per-worker key samples) and [`range_pact`] (routing by
//!   sorted key ranges, also as a `DistributorPact`).
//! - [`TreeJoin`]: group by key, then split large entries round after round in a timely loop.
//!
//! The modules are grouped by kind: [`exchange`] (routing), [`kernel`] (the local join),
//! [`statistics`] (counts, samples, load) and [`joins`]; each is also reachable by its own name
//! at the crate's root.
//!
//! Routing decides a *partition* `0..P`, and partition `p` lives on worker `p % W`
//! ([`Partitioning`]); load is counted per partition into a [`LoadRecorder`]. The building
//! blocks, [`route::route`] and [`partitioned_join::partitioned_join`], compose into the
//! skew-aware strategies of the planner crate, where one builder (`SkewJoin::skew_join`) reaches
//! every strategy, AM-Join, Tree-Join over its grid and VPRP included. Every join supports inner, left, right and full
//! outer, semi and anti joins with SQL NULL semantics ([`JoinType`]). Output rows go to a
//! closure, once per row, or to a [`JoinLogic`], which may take a hot key's pairs a group at a
//! time. A join hands its output downstream a bounded amount per activation while it runs (see
//! [`partitioned_join`]), so an operator that consumes rows as they come keeps little of them.
//!
//! Keys implement [`JoinKey`]: integers, `bool`, `char`, `String`, byte strings, `Option`, tuples
//! of up to four keys and the dynamic [`Key`] ([`key`] lists them); a newtype key gets the impl
//! from [`join_key_newtype!`].
//!
//! # Aggregating a join's output: combine before exchanging by key
//!
//! A skew-resistant join spreads a hot key's output over many partitions and workers. An
//! operator after it that exchanges rows by key (a count or sum per key, a group-by) sends all
//! of that output back to the one worker of the hot key: the skew the join removed returns, as
//! load and as the memory of every row queued for that worker. Fold the rows per worker first,
//! in a *combiner* without an exchange, and exchange the partial results: at most one per key,
//! worker and time, whatever the skew. Then fold the partials by key.
//!
//! ```
//! use std::collections::HashMap;
//! use skewjoin_operators::{JoinConfig, JoinType, ShuffleJoin};
//! use timely::dataflow::channels::pact::{Exchange, ParallelizationContract, Pipeline};
//! use timely::dataflow::operators::capture::Extract;
//! use timely::dataflow::operators::generic::Operator;
//! use timely::dataflow::operators::{Capability, Capture, ToStream};
//! use timely::dataflow::StreamVec;
//!
//! /// Sums the values of each key and time, over the records `pact` brings to each worker;
//! /// emits the sums once the time is complete.
//! fn sum_by_key<'s, P>(rows: StreamVec<'s, u64, (u64, u64)>, pact: P) -> StreamVec<'s, u64, (u64, u64)>
//! where
//!     P: ParallelizationContract<u64, Vec<(u64, u64)>>,
//! {
//!     rows.unary_frontier(pact, "SumByKey", |_, _| {
//!         let mut sums: Vec<(Capability<u64>, HashMap<u64, u64>)> = Vec::new();
//!         move |(input, frontier), output| {
//!             input.for_each(|stamp, data| {
//!                 let cap = stamp.retain_least(0).expect("records carry a time");
//!                 let at = match sums.iter().position(|(c, _)| c.time() == cap.time()) {
//!                     Some(at) => at,
//!                     None => {
//!                         sums.push((cap, HashMap::new()));
//!                         sums.len() - 1
//!                     }
//!                 };
//!                 for (key, value) in data.drain(..) {
//!                     *sums[at].1.entry(key).or_default() += value;
//!                 }
//!             });
//!             sums.retain_mut(|(cap, sums)| {
//!                 if frontier.less_equal(cap.time()) {
//!                     return true;
//!                 }
//!                 output.session(cap).give_iterator(sums.drain());
//!                 false
//!             });
//!         }
//!     })
//! }
//!
//! // Output rows per key of a join with a hot key 0 (500 x 500 rows) among cold ones.
//! let captured = timely::example(|scope| {
//!     let rows = || (0..1_000u64).map(|i| (if i % 2 == 0 { 0 } else { i }, i));
//!     let left = rows().to_stream(scope).container::<Vec<_>>();
//!     let right = rows().to_stream(scope).container::<Vec<_>>();
//!     let ones = left.shuffle_join_with(right, JoinType::Inner, &JoinConfig::new(), |key, _, _, out| {
//!         out.push((*key, 1u64))
//!     });
//!     // The combiner stays on each worker (Pipeline); only its partial sums are exchanged.
//!     let partial = sum_by_key(ones, Pipeline);
//!     sum_by_key(partial, Exchange::new(|&(key, _): &(u64, u64)| key)).capture()
//! });
//! let totals: HashMap<u64, u64> = captured.extract().into_iter().flat_map(|(_, rows)| rows).collect();
//! assert_eq!(totals[&0], 500 * 500);
//! assert_eq!(totals[&1], 1);
//! ```

// The vocabulary every part uses: keys, join types, output logic, configuration, errors, and the
// nested-loop join every test compares with.
pub mod config;
pub mod error;
pub mod join_logic;
pub mod join_type;
pub mod key;
pub mod reference;

// The parts, by kind.
pub mod exchange;
pub mod joins;
pub mod kernel;
pub mod statistics;

// Every module also keeps the path it had before the parts were grouped.
pub use exchange::{batch_builder, hash, partition, range_pact, route};
pub use joins::{broadcast_join, ddr_join, der_join, ib_join, shuffle_join, tree_join};
pub use kernel::{buckets, partitioned_join};
pub use statistics::{heavy_hitters, key_stats, load, sample};

pub use broadcast_join::BroadcastJoin;
pub use config::JoinConfig;
pub use ddr_join::DdrJoin;
pub use der_join::DerJoin;
pub use error::JoinError;
pub use ib_join::IbJoin;
pub use join_logic::JoinLogic;
pub use join_type::{JoinType, Side};
pub use key::{JoinKey, Key};
pub use load::{LoadFigures, LoadRecorder, LoadReport, PartitionLoad, TrafficCounters};
pub use partition::{Dest, Partitioning};
pub use reference::JoinedRow;
pub use shuffle_join::ShuffleJoin;
pub use tree_join::TreeJoin;
