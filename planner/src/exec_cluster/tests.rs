use std::net::TcpListener;

use skewjoin_operators::{JoinType, Key};

use super::*;
use crate::choose::choose;
use crate::datagen::{generate, GenSpec};
use crate::exec::{execute, RowRef};
use crate::strategies::Shuffle;
use crate::strategy::{PlanInputs, Strategy};

/// Output rows by the hashes of their sides, which the tests set to global row ids.
#[derive(Default)]
struct PairsSink(Vec<(Option<u64>, Option<u64>)>);

impl PairSink for PairsSink {
    type Summary = Vec<(Option<u64>, Option<u64>)>;
    fn emit(&mut self, left: Option<&RowRef>, right: Option<&RowRef>) {
        self.0.push((left.map(|row| row.1), right.map(|row| row.1)));
    }
    fn finish(self) -> Result<Self::Summary, String> {
        Ok(self.0)
    }
}

/// `n` loopback addresses with ports free a moment ago.
fn free_addresses(n: usize) -> Vec<String> {
    let listeners: Vec<TcpListener> = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    listeners
        .iter()
        .map(|listener| listener.local_addr().unwrap().to_string())
        .collect()
}

fn decide_for(
    strategy: Strategy,
    how: JoinType,
) -> impl Fn(&ClusterFacts) -> Result<Resolved, String> {
    move |facts: &ClusterFacts| {
        choose(
            strategy,
            &PlanInputs {
                how,
                left_rows: facts.left_rows,
                right_rows: facts.right_rows,
                workers: 4,
                broadcast_limit: facts.broadcast_limit,
                costs: WorkCosts::CLUSTER,
            },
        )
        .map(|choice| choice.resolved)
        .map_err(String::from)
    }
}

/// Rows `range` of `keys`, with each row's hash its global row id plus one.
fn share(keys: &[Key], range: std::ops::Range<usize>) -> (Arc<[Key]>, Arc<[u64]>) {
    (
        keys[range.clone()].into(),
        range.map(|row| row as u64 + 1).collect(),
    )
}

/// A process's share read as a stream, from memory: each side in order, its left side cut
/// every 100 rows so that the process's workers read it together.
struct ShareSource(JoinJob<Key>);

impl RowSource<Key> for ShareSource {
    fn read(
        &self,
        side: Side,
        _keys_only: bool,
        rows: std::ops::Range<u64>,
        send: &mut dyn FnMut(Key, u64),
    ) -> Result<(), String> {
        let (keys, hashes) = match side {
            Side::Left => (&self.0.left, &self.0.left_hashes),
            Side::Right => (&self.0.right, &self.0.right_hashes),
        };
        let rows = rows.start as usize..rows.end as usize;
        for (key, &hash) in keys[rows.clone()].iter().zip(&hashes[rows]) {
            send(key.clone(), hash);
        }
        Ok(())
    }

    fn cuts(&self, side: Side) -> Vec<u64> {
        match side {
            Side::Left => (100..self.0.left.len() as u64).step_by(100).collect(),
            Side::Right => Vec::new(),
        }
    }
}

/// Two processes of two workers each, every one holding half of each side, produce exactly
/// the output rows of a one-process run, for a strategy of each kind and several join types,
/// with their rows in memory and streamed; process 0 describes every partition.
#[test]
fn two_processes_produce_the_output_of_one() {
    let spec = GenSpec {
        left_rows: 1500,
        right_rows: 900,
        keys: 200,
        left_skew: 1.2,
        right_skew: 1.0,
        noise: 0.1,
        seed: 5,
        ..GenSpec::default()
    };
    let pair = generate(&spec);
    let left: Vec<Key> = pair.left.key.iter().map(|&k| Key::Int(k)).collect();
    let right: Vec<Key> = pair.right.key.iter().map(|&k| Key::Int(k)).collect();
    // Process 0 reads more left rows than process 1, as uneven file splits do.
    let cuts = (1000, 450);
    let mut compared = 0;
    for how in [
        JoinType::Inner,
        JoinType::Full,
        JoinType::LeftAnti,
        JoinType::RightSemi,
    ] {
        for strategy in [
            Strategy::Shuffle,
            Strategy::Ib,
            Strategy::Vprp,
            Strategy::Am,
            Strategy::Tree,
        ] {
            let partitions = 6;
            let whole = JoinJob {
                left: left.clone().into(),
                right: right.clone().into(),
                left_hashes: (1..=left.len() as u64).collect(),
                right_hashes: (1..=right.len() as u64).collect(),
                how,
                resolved: decide_for(strategy, how)(&ClusterFacts {
                    left_rows: left.len() as u64,
                    right_rows: right.len() as u64,
                    broadcast_limit: u64::MAX,
                    ..ClusterFacts::default()
                })
                .unwrap(),
                partitions,
                workers: 2,
            };
            let mut expected: Vec<_> = execute(whole.clone(), |_| PairsSink::default())
                .unwrap()
                .summaries
                .concat();
            expected.sort();

            for streamed in [false, true] {
                let addresses = free_addresses(2);
                let runs: Vec<_> = (0..2)
                    .map(|process| {
                        let (left_range, right_range) = if process == 0 {
                            (0..cuts.0, 0..cuts.1)
                        } else {
                            (cuts.0..left.len(), cuts.1..right.len())
                        };
                        let (left_keys, left_hashes) = share(&left, left_range);
                        let (right_keys, right_hashes) = share(&right, right_range);
                        let job = JoinJob {
                            left: left_keys,
                            right: right_keys,
                            left_hashes,
                            right_hashes,
                            ..whole.clone()
                        };
                        let facts = ProcessFacts {
                            left_rows: job.left.len() as u64,
                            right_rows: job.right.len() as u64,
                            broadcast_limit: u64::MAX,
                            fingerprint: 1,
                            key_sample: KeySample::default(),
                            work_costs: WorkCosts::CLUSTER,
                        };
                        let spec = ClusterSpec {
                            threads: 2,
                            process,
                            addresses: addresses.clone(),
                        };
                        // Process 1 connects to process 0, and timely retries a refused
                        // connection only after a second: give process 0 a moment to listen.
                        std::thread::sleep(Duration::from_millis(if process == 0 {
                            0
                        } else {
                            100
                        }));
                        std::thread::spawn(move || {
                            let decide = decide_for(strategy, how);
                            let value = |_, row, hash| (row, hash);
                            let sink = |_| PairsSink::default();
                            if !streamed {
                                return execute_cluster(
                                    job,
                                    &spec,
                                    facts,
                                    decide,
                                    value,
                                    sink,
                                    || {},
                                );
                            }
                            let stream = StreamJob {
                                left_rows: facts.left_rows,
                                right_rows: facts.right_rows,
                                how: job.how,
                                resolved: Resolved::Shuffle(Shuffle),
                                partitions: job.partitions,
                                workers: 2,
                            };
                            let source = Arc::new(ShareSource(job));
                            execute_cluster_stream(
                                stream,
                                source,
                                &spec,
                                Network::Timely,
                                facts,
                                decide,
                                value,
                                sink,
                                || {},
                            )
                        })
                    })
                    .collect();
                let outputs: Vec<_> = runs
                    .into_iter()
                    .map(|run| run.join().unwrap().unwrap())
                    .collect();
                let what = format!("{how} {strategy}, streamed: {streamed}");
                let first = &outputs[0];
                assert!(first.whole_cluster && !outputs[1].whole_cluster, "{what}");
                assert_eq!(first.resolved, whole.resolved, "{what}");
                assert_eq!(first.facts.left_rows, left.len() as u64, "{what}");
                let mut got: Vec<_> = first
                    .summaries
                    .iter()
                    .flat_map(|(_, rows)| rows.iter().copied())
                    .collect();
                got.sort();
                assert_eq!(got, expected, "{what}");
                assert_eq!(first.summaries.len(), 4, "{what}");
                assert_eq!(first.loads.per_partition.len(), partitions, "{what}");
                assert_eq!(first.loads.total_output(), expected.len() as u64, "{what}");
                // Process 1 alone reports its own two workers.
                let own: Vec<usize> = outputs[1].summaries.iter().map(|(w, _)| *w).collect();
                assert_eq!(own, [2, 3], "{what}");
                compared += 1;
            }
        }
    }
    assert_eq!(compared, 4 * 5 * 2);
}

/// Processes started with different arguments refuse to run, on every process.
#[test]
fn different_arguments_are_refused() {
    let addresses = free_addresses(2);
    let runs: Vec<_> = (0..2)
        .map(|process| {
            let job = JoinJob {
                left: Arc::from(vec![Key::Int(1)]),
                right: Arc::from(vec![Key::Int(1)]),
                left_hashes: Arc::from(Vec::new()),
                right_hashes: Arc::from(Vec::new()),
                how: JoinType::Inner,
                resolved: Resolved::Shuffle(Shuffle),
                partitions: 2,
                workers: 1,
            };
            let facts = ProcessFacts {
                left_rows: 1,
                right_rows: 1,
                broadcast_limit: 10,
                fingerprint: process as u64,
                key_sample: KeySample::default(),
                work_costs: WorkCosts::CLUSTER,
            };
            let spec = ClusterSpec {
                threads: 1,
                process,
                addresses: addresses.clone(),
            };
            std::thread::spawn(move || {
                execute_cluster(
                    job,
                    &spec,
                    facts,
                    |_: &ClusterFacts| Ok(Resolved::Shuffle(Shuffle)),
                    |_, row, hash| (row, hash),
                    |_| PairsSink::default(),
                    || {},
                )
            })
        })
        .collect();
    for run in runs {
        let error = run.join().unwrap().unwrap_err();
        assert!(
            error.message().contains("different join arguments"),
            "{error}"
        );
    }
}

#[test]
fn every_worker_needs_a_partition() {
    let spec = ClusterSpec {
        threads: 2,
        process: 0,
        addresses: vec!["a:1".into(), "b:2".into()],
    };
    assert!(spec.check(4).is_ok());
    let error = spec.check(3).unwrap_err();
    assert!(matches!(error, PlanError::Usage(_)), "{error:?}");
    assert!(error.message().contains("at least 4 partitions"), "{error}");
    let out_of_range = ClusterSpec {
        process: 2,
        ..spec.clone()
    };
    assert!(out_of_range
        .check(4)
        .unwrap_err()
        .message()
        .contains("out of range"));
}

#[test]
fn a_process_hosts_the_partitions_of_its_workers() {
    // P = 6 over 2 processes of 2 workers: partition p is owned by worker p % 4.
    let partitioning = Partitioning::new(6, 4);
    let first = RowHomes::of_process(&partitioning, 0, 2);
    let second = RowHomes::of_process(&partitioning, 2, 2);
    let homes = |homes: &RowHomes, rows: u64| -> Vec<u32> {
        (0..rows).map(|row| homes.home(row, rows)).collect()
    };
    // Process 0 hosts 0, 1, 4 and 5; process 1 hosts 2 and 3.
    assert_eq!(homes(&first, 8), [0, 0, 1, 1, 4, 4, 5, 5]);
    assert_eq!(homes(&second, 4), [2, 2, 3, 3]);
    assert_eq!(first.rows_of(4, 8), 4..6);
    assert_eq!(first.rows_of(2, 8), 0..0);
}

#[test]
fn processes_plan_with_the_slowest_link_and_refuse_other_costs_that_differ() {
    let facts = |crossing_per_mille, key_count_per_mille| ProcessFacts {
        left_rows: 10,
        right_rows: 20,
        broadcast_limit: 100,
        fingerprint: 7,
        key_sample: KeySample::default(),
        work_costs: WorkCosts {
            crossing_per_mille,
            key_count_per_mille,
            ..WorkCosts::CLUSTER
        },
    };
    let key_count = WorkCosts::CLUSTER.key_count_per_mille;
    // A machine with fewer cores weighs its link more; every process takes the same figure.
    let cluster = agree(&[facts(300, key_count), facts(900, key_count)], 4, 2).unwrap();
    assert_eq!(cluster.work_costs.crossing_per_mille, 900);
    assert_eq!((cluster.left_rows, cluster.right_rows), (20, 40));
    let error = agree(&[facts(300, key_count), facts(300, key_count + 1)], 4, 2).unwrap_err();
    assert!(error.contains("different join arguments"), "{error}");
}
