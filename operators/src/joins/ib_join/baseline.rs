//! The DER and DDR baselines over unrouted inputs: IB-Join's dataflow with small rows tagged by
//! a row id, so that owners can track rows rather than keys.

use timely::dataflow::channels::pact::Pipeline;
use timely::dataflow::operators::generic::Operator;
use timely::dataflow::StreamVec;
use timely::progress::Timestamp;
use timely::ExchangeData;

use super::dataflow::ib_with_home;
use super::index::by_key_and_id;
use super::tracking::TrackingMode;
use crate::join_logic::{each_row, JoinLogic};
use crate::join_type::{JoinType, Side};
use crate::key::JoinKey;
use crate::load::LoadRecorder;
use crate::partition::Partitioning;
use crate::route::{null_aware, route, Destination};

/// The DER or DDR baseline (`mode`) over unrouted inputs: small rows are tagged with a row id
/// unique across workers (`sequence * W + worker`, so every worker orders a key's rows the same
/// way), then broadcast; large rows go to `home_large` (NULL keys dropped unless kept), small
/// NULL-keyed rows, when kept, to `home_small`. IB-Join itself needs no row ids: use
/// [`ib_join_routed`](crate::ib_join::ib_join_routed) for [`TrackingMode::Ib`].
#[allow(clippy::too_many_arguments)]
pub fn baseline_join<'s, T, K, L, R, HL, HR, D, F>(
    left: StreamVec<'s, T, (K, L)>,
    right: StreamVec<'s, T, (K, R)>,
    how: JoinType,
    small: Side,
    mode: TrackingMode,
    partitioning: Partitioning,
    homes: (HL, HR),
    loads: LoadRecorder,
    mut logic: F,
) -> StreamVec<'s, T, D>
where
    T: Timestamp,
    K: JoinKey,
    L: ExchangeData + Clone,
    R: ExchangeData + Clone,
    HL: FnMut(&K, &L) -> u32 + 'static,
    HR: FnMut(&K, &R) -> u32 + 'static,
    D: Clone + 'static,
    F: JoinLogic<K, L, R, D> + 'static,
{
    let (mut home_left, mut home_right) = homes;
    let keep_left = how.keeps_unmatched(Side::Left);
    let keep_right = how.keeps_unmatched(Side::Right);
    match small {
        Side::Left => ib_with_home(
            route(
                tag_rows(left),
                "TagLeft",
                null_aware(
                    Destination::Everywhere,
                    keep_left,
                    move |k, v: &(u64, L)| home_left(k, &v.1),
                ),
            ),
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
                    logic.row(key, s.map(|s| &s.1), g, out)
                },
            ),
        ),
        Side::Right => ib_with_home(
            route(
                tag_rows(right),
                "TagRight",
                null_aware(
                    Destination::Everywhere,
                    keep_right,
                    move |k, v: &(u64, R)| home_right(k, &v.1),
                ),
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
                    logic.row(key, g, s.map(|s| &s.1), out)
                },
            ),
        ),
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
