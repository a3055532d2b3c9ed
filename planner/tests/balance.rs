//! AM-Join's load balance on skewed inputs, against Shuffle-Join on the same data. Loads are
//! counted records and rows, not times, so these bounds are deterministic.

use std::sync::Arc;

use skewjoin_operators::tree_join::TreeParams;
use skewjoin_operators::{JoinType, LoadReport};
use skewjoin_planner::am_join::AmParams;
use skewjoin_planner::count_sink::CountSink;
use skewjoin_planner::datagen::{generate, GenSpec};
use skewjoin_planner::exec::{execute, JoinJob};
use skewjoin_planner::strategies::{Am, Shuffle, Tree, TreeBasic};
use skewjoin_planner::strategy::Resolved;

fn run(
    left: &[i64],
    right: &[i64],
    how: JoinType,
    resolved: Resolved,
    partitions: usize,
    workers: usize,
) -> (u64, LoadReport) {
    let job = JoinJob {
        left: left.into(),
        right: right.into(),
        left_hashes: Arc::new([]),
        right_hashes: Arc::new([]),
        how,
        resolved,
        partitions,
        workers,
    };
    // Counted, not kept: the joins below produce millions of rows.
    let output = execute(job, |_| CountSink::default()).unwrap();
    (
        output.summaries.iter().map(|counted| counted.rows).sum(),
        output.loads,
    )
}

fn am_default() -> Resolved {
    Resolved::Am(Am {
        params: AmParams::default(),
    })
}

fn tree() -> Resolved {
    Resolved::Tree(Tree {
        params: AmParams::default(),
        tree: TreeParams {
            leaf: 256,
            fanout: 2,
        },
    })
}

fn tree_basic() -> Resolved {
    Resolved::TreeBasic(TreeBasic {
        tree: TreeParams {
            leaf: 256,
            fanout: 2,
        },
    })
}

#[test]
fn one_key_hot_on_both_sides_is_spread_over_every_partition() {
    let left = vec![5i64; 2000];
    let right = vec![5i64; 2000];
    for how in [JoinType::Inner, JoinType::Full, JoinType::Left] {
        let (rows, shuffle) = run(&left, &right, how, Resolved::Shuffle(Shuffle), 8, 2);
        assert_eq!(rows, 4_000_000);
        assert!(
            shuffle.output_imbalance() > 7.99,
            "{}",
            shuffle.output_imbalance()
        );
        for resolved in [am_default(), tree()] {
            let (rows, am) = run(&left, &right, how, resolved, 8, 2);
            assert_eq!(rows, 4_000_000, "{how} {resolved:?}");
            assert_eq!(am.total_output(), 4_000_000);
            let (output, input) = (am.output_imbalance(), am.input_imbalance());
            assert!(output <= 1.3, "{how} {resolved:?}: {output}");
            assert!(input <= 1.3, "{how} {resolved:?}: {input}");
        }
        // Basic Tree-Join splits the key's block over the partitions by hash, not by plan:
        // every pair once, spread, though less evenly.
        let (rows, basic) = run(&left, &right, how, tree_basic(), 8, 2);
        assert_eq!(rows, 4_000_000);
        assert!(
            basic.output_imbalance() < 4.0,
            "{}",
            basic.output_imbalance()
        );
        eprintln!(
            "{how}: tree-basic output max/mean {:.2}",
            basic.output_imbalance()
        );
    }
    // Semi joins emit each record once, where it is read: no partition gets them all either.
    let (rows, am) = run(&left, &right, JoinType::LeftSemi, am_default(), 8, 2);
    assert_eq!(rows, 2000);
    assert!(am.output_imbalance() <= 1.3, "{}", am.output_imbalance());
    let (rows, _) = run(&left, &right, JoinType::RightAnti, am_default(), 8, 2);
    assert_eq!(rows, 0);
}

#[test]
fn zipf_output_and_input_are_balanced() {
    let data = generate(&GenSpec {
        left_rows: 20_000,
        right_rows: 20_000,
        keys: 2_000,
        ..GenSpec::default()
    });
    let counts = data.counts();
    for partitions in [8, 32] {
        let (rows, shuffle) = run(
            &data.left.key,
            &data.right.key,
            JoinType::Inner,
            Resolved::Shuffle(Shuffle),
            partitions,
            2,
        );
        assert_eq!(rows, counts.inner);
        let (rows, am) = run(
            &data.left.key,
            &data.right.key,
            JoinType::Inner,
            am_default(),
            partitions,
            2,
        );
        assert_eq!(rows, counts.inner);
        eprintln!(
            "P={partitions}: shuffle out {:.2} in {:.2}; am out {:.2} in {:.2}",
            shuffle.output_imbalance(),
            shuffle.input_imbalance(),
            am.output_imbalance(),
            am.input_imbalance()
        );
        assert!(
            shuffle.output_imbalance() > 3.0,
            "{}",
            shuffle.output_imbalance()
        );
        // The target: both within 1.2.
        assert!(
            am.output_imbalance() <= 1.2,
            "P={partitions}: {}",
            am.output_imbalance()
        );
        assert!(
            am.input_imbalance() <= 1.2,
            "P={partitions}: {}",
            am.input_imbalance()
        );
        // The grid's cells split further by Tree-Join rounds stay balanced.
        let (rows, tree) = run(
            &data.left.key,
            &data.right.key,
            JoinType::Inner,
            tree(),
            partitions,
            2,
        );
        assert_eq!(rows, counts.inner);
        eprintln!(
            "P={partitions}: tree out {:.2} in {:.2}",
            tree.output_imbalance(),
            tree.input_imbalance()
        );
        assert!(
            tree.output_imbalance() <= 1.3,
            "{}",
            tree.output_imbalance()
        );
        // Outer joins count the same rows through the same classes.
        let (rows, _) = run(
            &data.left.key,
            &data.right.key,
            JoinType::Full,
            am_default(),
            partitions,
            2,
        );
        assert_eq!(rows, counts.full);
        let (rows, _) = run(
            &data.left.key,
            &data.right.key,
            JoinType::RightSemi,
            am_default(),
            partitions,
            2,
        );
        assert_eq!(rows, counts.right_semi);
    }
}
