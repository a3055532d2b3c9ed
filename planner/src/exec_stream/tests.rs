use super::*;
use crate::am_join::params::AmParams;
use crate::exec::{execute, CollectSink, JoinJob};
use crate::strategies::{Am, Broadcast, Der, Ib, Shuffle, Tree, Vprp};
use crate::strategy::Resolved;
use skewjoin_operators::broadcast_join::check_broadcast;
use skewjoin_operators::tree_join::TreeParams;
use skewjoin_operators::{Key, LoadReport};

/// Rows from memory, read a side at a time as a file would be, or in parts between cuts
/// every `cut_every` rows.
struct Memory {
    left: Vec<Key>,
    right: Vec<Key>,
    /// Rows to add to the right side on its read for the join: a file that grew.
    extra: usize,
    /// Where the sides may be cut (none when 0).
    cut_every: u64,
}

impl RowSource<Key> for Memory {
    fn read(
        &self,
        side: Side,
        keys_only: bool,
        rows: Range<u64>,
        send: &mut dyn FnMut(Key, u64),
    ) -> Result<(), String> {
        let keys = match side {
            Side::Left => &self.left,
            Side::Right => &self.right,
        };
        for row in rows.clone() {
            let key = keys[row as usize].clone();
            send(key, if keys_only { 0 } else { row + 1 });
        }
        if side == Side::Right && !keys_only && rows.end == keys.len() as u64 {
            for _ in 0..self.extra {
                send(Key::Int(1), 0);
            }
        }
        Ok(())
    }

    fn cuts(&self, side: Side) -> Vec<u64> {
        let rows = match side {
            Side::Left => self.left.len(),
            Side::Right => self.right.len(),
        } as u64;
        match self.cut_every {
            0 => Vec::new(),
            every => (every..rows).step_by(every as usize).collect(),
        }
    }
}

#[test]
fn parts_follow_the_cuts_and_cover_every_row_once() {
    // Cuts every 10 rows of 95: three parts near 31.7 rows each.
    let cuts: Vec<u64> = (10..95).step_by(10).collect();
    assert_eq!(split_at_cuts(&cuts, 95, 3), vec![0..30, 30..60, 60..95]);
    // No cuts: one part holds every row, the others are empty.
    assert_eq!(split_at_cuts(&[], 95, 3), vec![0..0, 0..0, 0..95]);
    // More parts than cuts allow: some are empty, none overlaps.
    assert_eq!(
        split_at_cuts(&[50], 100, 4),
        vec![0..50, 50..50, 50..50, 50..100]
    );
    for parts in 1..6 {
        for rows in [0u64, 1, 7, 64, 1000] {
            let cuts: Vec<u64> = (3..rows).step_by(7).collect();
            let split = split_at_cuts(&cuts, rows, parts);
            assert_eq!(split.len(), parts);
            assert_eq!(split[0].start, 0);
            assert_eq!(split[parts - 1].end, rows);
            for pair in split.windows(2) {
                assert_eq!(pair[0].end, pair[1].start);
                assert!(pair[0].start <= pair[0].end);
                assert!(pair[0].end == 0 || cuts.contains(&pair[0].end) || pair[0].end == rows);
            }
        }
    }
}

fn skewed(rows: usize, seed: u64) -> Vec<Key> {
    (0..rows)
        .map(|row| match (row as u64 * 2654435761 + seed) % 10 {
            0..=4 => Key::Int(7),
            5 => Key::Null,
            other => Key::Int(other as i64 * 1000 + row as i64 % 50),
        })
        .collect()
}

fn sorted(mut rows: Vec<(Option<u32>, Option<u32>)>) -> Vec<(Option<u32>, Option<u32>)> {
    rows.sort_unstable();
    rows
}

#[test]
fn streaming_gives_the_rows_and_loads_of_an_in_memory_run() {
    let (left, right) = (skewed(3000, 1), skewed(2000, 5));
    let strategies = [
        Resolved::Shuffle(Shuffle),
        Resolved::Am(Am {
            params: AmParams::default(),
        }),
        Resolved::Tree(Tree {
            params: AmParams::default(),
            tree: TreeParams::default(),
        }),
        Resolved::Ib(Ib { small: Side::Right }),
        Resolved::Der(Der { small: Side::Right }),
        Resolved::Broadcast(Broadcast { side: Side::Right }),
        Resolved::Vprp(Vprp(Default::default())),
    ];
    for resolved in strategies {
        for how in [JoinType::Inner, JoinType::Full, JoinType::LeftAnti] {
            for workers in [1, 2, 3] {
                let partitions = workers * 2;
                let memory = JoinJob {
                    left: left.clone().into(),
                    right: right.clone().into(),
                    left_hashes: (1..=left.len() as u64).collect(),
                    right_hashes: (1..=right.len() as u64).collect(),
                    how,
                    resolved,
                    partitions,
                    workers,
                };
                // A broadcast of a side the join type keeps is refused, not run wrong.
                if let Resolved::Broadcast(Broadcast { side }) = resolved {
                    if check_broadcast(how, side).is_err() {
                        assert!(execute(memory, |_| CollectSink::default()).is_err());
                        continue;
                    }
                }
                let expected = execute(memory, |_| CollectSink::default()).unwrap();
                let job = StreamJob {
                    left_rows: left.len() as u64,
                    right_rows: right.len() as u64,
                    how,
                    resolved,
                    partitions,
                    workers,
                };
                let expected_rows = sorted(expected.summaries.into_iter().flatten().collect());
                // Each side read whole by one worker, and in parts by every worker.
                for cut_every in [0, 256] {
                    let source = Arc::new(Memory {
                        left: left.clone(),
                        right: right.clone(),
                        extra: 0,
                        cut_every,
                    });
                    let case = format!(
                        "{} {how:?} W={workers} cut every {cut_every}",
                        resolved.name()
                    );
                    let streamed = execute_stream(job, source, |_| CollectSink::default()).unwrap();
                    assert_eq!(
                        sorted(streamed.summaries.into_iter().flatten().collect()),
                        expected_rows,
                        "{case}"
                    );
                    // Peaks depend on arrival order; what each partition received and
                    // produced does not, except with VPRP, whose sample is drawn on the
                    // workers that feed the rows, and with AM-Join's grids read in parts,
                    // whose rows and columns each feeding worker deals round-robin from its
                    // own start: there only the totals are the same.
                    let totals_only = matches!(resolved, Resolved::Vprp(_))
                        || (cut_every > 0
                            && matches!(
                                resolved,
                                Resolved::Am(Am { .. }) | Resolved::Tree(Tree { .. })
                            ));
                    let counts = |loads: &LoadReport| match totals_only {
                        true => vec![(loads.total_input(), loads.total_output())],
                        false => loads
                            .per_partition
                            .iter()
                            .map(|load| (load.input_records, load.output_rows))
                            .collect(),
                    };
                    assert_eq!(counts(&streamed.loads), counts(&expected.loads), "{case}");
                }
            }
        }
    }
}

#[test]
fn a_source_that_changed_since_planning_is_an_error() {
    let job = StreamJob {
        left_rows: 10,
        right_rows: 10,
        how: JoinType::Inner,
        resolved: Resolved::Shuffle(Shuffle),
        partitions: 2,
        workers: 2,
    };
    let keys: Vec<Key> = (0..10).map(Key::Int).collect();
    let source = Arc::new(Memory {
        left: keys.clone(),
        right: keys.clone(),
        extra: 3,
        cut_every: 0,
    });
    let error = execute_stream(job, source, |_| CollectSink::default()).unwrap_err();
    assert!(matches!(error, PlanError::Execution(_)), "{error:?}");
    assert!(
        error.message().contains("right input had 10 rows"),
        "{error}"
    );
    assert!(error.message().contains("but 13"), "{error}");
    // A side that was empty when planned and has rows when read.
    let source = Arc::new(Memory {
        left: keys.clone(),
        right: Vec::new(),
        extra: 2,
        cut_every: 0,
    });
    let empty_right = StreamJob {
        right_rows: 0,
        ..job
    };
    let error = execute_stream(empty_right, source, |_| CollectSink::default()).unwrap_err();
    assert!(
        error.message().contains("right input had 0 rows"),
        "{error}"
    );
    assert!(error.message().contains("but 2"), "{error}");
    // Read in parts, the last part of the right side grew.
    let source = Arc::new(Memory {
        left: keys.clone(),
        right: keys,
        extra: 3,
        cut_every: 4,
    });
    let error = execute_stream(job, source, |_| CollectSink::default()).unwrap_err();
    assert!(
        error
            .message()
            .contains("rows 4 to 10 of the right input were 6 rows"),
        "{error}"
    );
    assert!(error.message().contains("but 9"), "{error}");
}
