//! Where skewjoin's time goes, piece by piece: the local kernel's build and probe, output
//! production against the plainest pair loop, the exchange path of a whole Shuffle-Join on two
//! workers, Tree-Join's splitting and leaf joins, and VPRP's routing by binary search.
//! `cargo bench -p skewjoin-benches`; throughput is in input records or output pairs per second.

use std::hint::black_box;
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use skewjoin_benches::uniform_keys;
use skewjoin_operators::buckets::{join_buckets_logic, KeyBuckets};
use skewjoin_operators::hash::{mix64, pair_checksum, pair_checksum_sum_lefts, GroupChecksums};
use skewjoin_operators::join_logic::each_row;
use skewjoin_operators::kernel::{hash_join, local_join_logic};
use skewjoin_operators::range_pact::RangeTable;
use skewjoin_operators::tree_join::TreeParams;
use skewjoin_operators::{JoinLogic, JoinType};
use skewjoin_planner::count_sink::CountSink;
use skewjoin_planner::exec::{execute, JoinJob};
use skewjoin_planner::strategies::{Shuffle, TreeBasic};
use skewjoin_planner::Resolved;

/// Build and probe of uniform keys (about one output row per input row): 1M x 1M, whose one
/// table fits this machine's 32 MiB L3 cache, and 4M x 4M, whose table does not. Each size
/// joined with one table, and as a partition is joined: its rows pushed into hash buckets as
/// they arrive (the pushes are timed too: they replace the one vector the rows were gathered
/// in), then joined a bucket at a time.
fn kernel(c: &mut Criterion) {
    let mut group = c.benchmark_group("kernel");
    group.sample_size(10);
    // Keys drawn independently on each side: the sides of a real join do not list their keys
    // in the same order (a probe in build order would read the table's runs one after another).
    let side = |rows: usize, salt: u64| -> Vec<(u64, u32)> {
        (0..rows as u64)
            .map(|i| (mix64(i ^ salt) % rows as u64, i as u32))
            .collect()
    };
    for (name, rows) in [("1M x 1M", 1usize << 20), ("4M x 4M", 1 << 22)] {
        let left = side(rows, 1);
        let right = side(rows, 2);
        group.throughput(Throughput::Elements((left.len() + right.len()) as u64));
        group.bench_function(format!("hash_join {name} uniform"), |b| {
            b.iter_batched(
                || (left.clone(), right.clone()),
                |(mut l, mut r)| {
                    let mut rows = 0u64;
                    hash_join(&mut l, &mut r, JoinType::Inner, |_, _, _| rows += 1);
                    black_box(rows)
                },
                BatchSize::LargeInput,
            )
        });
        group.bench_function(
            format!("{name} uniform, pushed into hash buckets, joined by bucket"),
            |b| {
                b.iter_batched(
                    || (left.clone(), right.clone()),
                    |(l, r)| {
                        let (mut lb, mut rb) = (KeyBuckets::new(), KeyBuckets::new());
                        l.into_iter().for_each(|row| lb.push(row));
                        r.into_iter().for_each(|row| rb.push(row));
                        let mut rows = 0u64;
                        let mut count = each_row(
                            |_: &u64, _: Option<&u32>, _: Option<&u32>, _: &mut Vec<()>| rows += 1,
                        );
                        join_buckets_logic(
                            &mut lb,
                            &mut rb,
                            None,
                            None,
                            JoinType::Inner,
                            &mut count,
                            &mut Vec::new(),
                        );
                        black_box(rows)
                    },
                    BatchSize::LargeInput,
                )
            },
        );
    }
    group.finish();
}

/// Output production: one key with 4,000 rows a side (16M pairs), each pair checksummed as the
/// runtime does, through the kernel and through the plainest nested loop over the two lists.
fn output(c: &mut Criterion) {
    let left: Vec<(u64, u64)> = (0..4000u64).map(|i| (7, i.wrapping_mul(31))).collect();
    let right: Vec<(u64, u64)> = (0..4000u64).map(|i| (7, i.wrapping_mul(17))).collect();
    let mut group = c.benchmark_group("output");
    group.sample_size(10);
    group.throughput(Throughput::Elements((left.len() * right.len()) as u64));
    group.bench_function("kernel, checksummed pairs", |b| {
        b.iter_batched(
            || (left.clone(), right.clone()),
            |(mut l, mut r)| {
                let mut sum = 0u64;
                hash_join(&mut l, &mut r, JoinType::Inner, |_, l, r| {
                    sum = sum.wrapping_add(pair_checksum(l.copied(), r.copied()));
                });
                black_box(sum)
            },
            BatchSize::LargeInput,
        )
    });
    group.bench_function(
        "kernel, a group at a time, hashes gathered for group sums",
        |b| {
            b.iter_batched(
                || (left.clone(), right.clone()),
                |(mut l, mut r)| {
                    let mut sum = GroupSum(0, GroupChecksums::new());
                    local_join_logic(
                        &mut l,
                        &mut r,
                        None,
                        None,
                        JoinType::Inner,
                        &mut sum,
                        &mut Vec::new(),
                    );
                    black_box(sum.0)
                },
                BatchSize::LargeInput,
            )
        },
    );
    group.bench_function("plain nested loop, checksummed pairs", |b| {
        b.iter(|| {
            let mut sum = 0u64;
            for (_, l) in &left {
                for (_, r) in &right {
                    sum = sum.wrapping_add(pair_checksum(Some(*l), Some(*r)));
                }
            }
            black_box(sum)
        })
    });
    // The same pairs, each right row's checksums summed over the left hashes at once, as the
    // runtime's tally does with a group (eight pairs at a time where the CPU has AVX-512).
    let left_hashes: Vec<u64> = left.iter().map(|(_, hash)| *hash).collect();
    group.bench_function("group sums (pair_checksum_sum_lefts)", |b| {
        b.iter(|| {
            let sum = right.iter().fold(0u64, |sum, (_, r)| {
                sum.wrapping_add(pair_checksum_sum_lefts(&left_hashes, *r))
            });
            black_box(sum)
        })
    });
    group.finish();
}

/// Checksums output rows as the runtime's sinks do: a group's row hashes gathered and summed in
/// one loop.
struct GroupSum(u64, GroupChecksums);

impl JoinLogic<u64, u64, u64, ()> for GroupSum {
    fn row(&mut self, _: &u64, l: Option<&u64>, r: Option<&u64>, _: &mut Vec<()>) {
        self.0 = self.0.wrapping_add(pair_checksum(l.copied(), r.copied()));
    }

    fn lefts_with<'v>(
        &mut self,
        _: &u64,
        lefts: impl ExactSizeIterator<Item = &'v u64>,
        right: &u64,
        _: &mut Vec<()>,
    ) {
        let sum = self.1.sum_lefts(lefts.copied(), *right);
        self.0 = self.0.wrapping_add(sum);
    }
}

fn job(left: Vec<u64>, right: Vec<u64>, resolved: Resolved, partitions: usize) -> JoinJob<u64> {
    JoinJob {
        left: Arc::from(left),
        right: Arc::from(right),
        left_hashes: Arc::new([]),
        right_hashes: Arc::new([]),
        how: JoinType::Inner,
        resolved,
        partitions,
        workers: 2,
    }
}

/// The exchange path: a whole Shuffle-Join on 2 worker threads, 1M x 1M uniform keys.
fn exchange(c: &mut Criterion) {
    let left: Vec<u64> = uniform_keys(1 << 20, 1 << 20)
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    let right: Vec<u64> = uniform_keys(1 << 20, 1 << 20)
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    let mut group = c.benchmark_group("exchange");
    group.sample_size(10);
    group.throughput(Throughput::Elements((left.len() + right.len()) as u64));
    group.bench_function("shuffle join, W = 2, P = 8", |b| {
        b.iter(|| {
            let output = execute(
                job(left.clone(), right.clone(), Resolved::Shuffle(Shuffle), 8),
                |_| CountSink::default(),
            )
            .unwrap();
            black_box(output.summaries.iter().map(|s| s.rows).sum::<u64>())
        })
    });
    group.finish();
}

/// Tree-Join: one key with 8,192 rows a side split down to leaves of 1,024 (fan-out 4, 3 rounds),
/// 67M output pairs, on 2 workers.
fn tree(c: &mut Criterion) {
    let keys = vec![7u64; 8192];
    let resolved = Resolved::TreeBasic(TreeBasic {
        tree: TreeParams {
            leaf: 1024,
            fanout: 4,
        },
    });
    let mut group = c.benchmark_group("tree_join");
    group.sample_size(10);
    group.throughput(Throughput::Elements(8192 * 8192));
    group.bench_function("one key 8192 x 8192, leaf 1024, W = 2", |b| {
        b.iter(|| {
            let output = execute(job(keys.clone(), keys.clone(), resolved, 8), |_| {
                CountSink::default()
            })
            .unwrap();
            black_box(output.report.tree_rounds)
        })
    });
    group.finish();
}

/// VPRP's routing: the partition of 1M keys by binary search over 63 boundaries.
fn vprp_routing(c: &mut Criterion) {
    let boundaries: Vec<u64> = (1..64u64).map(|i| i << 14).collect();
    let table = RangeTable {
        virtual_of_run: (0..64).collect(),
        partition_of_virtual: (0..64).map(|v| v % 32).collect(),
        planned: vec![1; 64],
        boundaries,
    };
    let keys: Vec<u64> = uniform_keys(1 << 20, 1 << 20)
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    let mut group = c.benchmark_group("vprp");
    group.throughput(Throughput::Elements(keys.len() as u64));
    group.bench_function("route 1M keys over 64 ranges", |b| {
        b.iter(|| {
            let mut sum = 0u64;
            for key in &keys {
                sum += table.partition_of(key) as u64;
            }
            black_box(sum)
        })
    });
    group.finish();
}

criterion_group!(benches, kernel, output, exchange, tree, vprp_routing);
criterion_main!(benches);
