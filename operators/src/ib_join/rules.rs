//! Where IB-Join sends each side's records: the small side broadcast (its NULL keys, which
//! match nothing, to a home partition or dropped), the large side to its home.

use crate::key::JoinKey;
use crate::route::Route;

/// The partition a record starts in (its home); may be stateful, such as a round-robin.
pub type HomeFn<K, V> = Box<dyn FnMut(&K, &V) -> u32>;

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

/// [`index_rule`] for a home that may keep state (a round-robin).
pub(super) fn index_rule_mut<K: JoinKey, V>(
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

pub(super) fn home_rule<K: JoinKey, V: 'static>(
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

pub(super) fn tagged_rule<K: JoinKey, V: 'static>(
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
