//! Work shared among a few threads that take items in turn: the skew check's parts, the
//! columns of a row group, the units of a side read twice.
//!
//! The items are coarse (a part of a file, a column of 64 Ki rows, a row group of input), so a
//! thread that finishes one early takes the next rather than each thread being dealt a share
//! beforehand: the shares' sizes are only estimates, and the run ends with its slowest thread.

use std::sync::{Mutex, PoisonError};

/// Items handed out one at a time, in order, to whichever thread asks next: each to exactly
/// one thread, until every item has been taken or a thread [stops](InTurn::stop) them.
pub(crate) struct InTurn<I>(Mutex<Option<I>>);

impl<I: Iterator> InTurn<I> {
    pub(crate) fn new(items: impl IntoIterator<IntoIter = I>) -> Self {
        InTurn(Mutex::new(Some(items.into_iter())))
    }

    /// The next item, or `None` once every item has been taken or they were stopped.
    pub(crate) fn take(&self) -> Option<I::Item> {
        self.items().as_mut()?.next()
    }

    /// Hands out no more items: each other thread stops after the item it holds.
    pub(crate) fn stop(&self) {
        *self.items() = None;
    }

    /// Calls `work` on the items this thread takes until none is left, or until `work` fails:
    /// then no thread takes another (an error ends the job; the items left would be work
    /// thrown away), and the error is returned.
    pub(crate) fn try_each<E>(
        &self,
        mut work: impl FnMut(I::Item) -> Result<(), E>,
    ) -> Result<(), E> {
        while let Some(item) = self.take() {
            if let Err(error) = work(item) {
                self.stop();
                return Err(error);
            }
        }
        Ok(())
    }

    fn items(&self) -> std::sync::MutexGuard<'_, Option<I>> {
        // Nothing panics while the lock is held (an iterator's `next`, or dropping the items
        // left when they are stopped: `take` waits for that drop), and a poisoned lock would
        // still hold a valid iterator.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Runs `work` on `threads` new threads at once (at least one) and returns what each returned:
/// `Err` holds the payload of a thread that panicked, for the caller to turn into its error or
/// to resume.
///
/// The calling thread only waits. Given a share, it allocates from glibc's main arena, which
/// memory the workers' threads freed cannot serve: lineitem x orders written peaked 50 MiB
/// higher (630 against 580 MiB) when it wrote a share of the last units.
pub(crate) fn on_threads<R: Send>(
    threads: usize,
    work: impl Fn() -> R + Sync,
) -> Vec<std::thread::Result<R>> {
    std::thread::scope(|scope| {
        let others: Vec<_> = (0..threads.max(1)).map(|_| scope.spawn(&work)).collect();
        others.into_iter().map(|other| other.join()).collect()
    })
}

/// Runs `work` on every item of `items` on `threads` threads (at least one) that take the items
/// in turn, each into a state of its own made by `new_state`; `work` is given the item's place
/// in `items` too. Returns the threads' states, or the error of the earliest item that failed:
/// after a failure no thread takes another item, and the items before it had all been taken and
/// are finished, so that error is the first item's that fails, whichever thread hit it and
/// whenever (of a file's parts in order, the first bad one, not a part that one thread happened
/// to fail on first). A thread's panic is resumed before any error is returned.
pub(crate) fn try_in_turn<I: Send, S: Send, E: Send>(
    items: impl IntoIterator<Item = I, IntoIter: Send>,
    threads: usize,
    new_state: impl Fn() -> S + Sync,
    work: impl Fn(&mut S, usize, I) -> Result<(), E> + Sync,
) -> Result<Vec<S>, E> {
    let items = InTurn::new(items.into_iter().enumerate());
    let results = on_threads(threads, || -> Result<S, (usize, E)> {
        let mut state = new_state();
        items.try_each(|(place, item)| work(&mut state, place, item).map_err(|e| (place, e)))?;
        Ok(state)
    });
    let mut states = Vec::with_capacity(results.len());
    let mut first_failure: Option<(usize, E)> = None;
    for result in results {
        match result.unwrap_or_else(|panic| std::panic::resume_unwind(panic)) {
            Ok(state) => states.push(state),
            Err((place, error)) => {
                if first_failure
                    .as_ref()
                    .is_none_or(|(first, _)| place < *first)
                {
                    first_failure = Some((place, error));
                }
            }
        }
    }
    match first_failure {
        Some((_, error)) => Err(error),
        None => Ok(states),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Barrier;

    #[test]
    fn every_item_goes_to_exactly_one_thread() {
        for threads in [1, 2, 3, 8] {
            let items = InTurn::new(0..1000u32);
            let results = on_threads(threads, || {
                let mut taken = Vec::new();
                while let Some(item) = items.take() {
                    taken.push(item);
                }
                taken
            });
            assert_eq!(results.len(), threads);
            let taken: Vec<Vec<u32>> = results.into_iter().map(Result::unwrap).collect();
            // Each thread takes its items in order.
            assert!(
                taken.iter().all(|taken| taken.is_sorted()),
                "{threads} threads"
            );
            let mut all: Vec<u32> = taken.into_iter().flatten().collect();
            all.sort_unstable();
            assert_eq!(all, (0..1000).collect::<Vec<_>>(), "{threads} threads");
        }
    }

    #[test]
    fn after_a_failure_no_thread_takes_another_item() {
        // One thread: the items before the failing one are done, and none after it.
        let items = InTurn::new(0..1000u32);
        let mut done = Vec::new();
        let failed = items.try_each(|item| {
            if item == 10 {
                return Err(item);
            }
            done.push(item);
            Ok(())
        });
        assert_eq!(failed, Err(10));
        assert_eq!(done, (0..10).collect::<Vec<_>>());
        assert_eq!(items.take(), None);
        // Several: each thread holds one of the first items (the first barrier) when the one
        // holding item 0 fails; the others wait (the second barrier) until it has stopped the
        // items, so no item past the first ones is ever taken, whatever the threads' timing.
        for threads in [2, 3, 8] {
            let items = InTurn::new(0..100_000u32);
            let (held, stopped) = (Barrier::new(threads), Barrier::new(threads));
            let later = AtomicUsize::new(0);
            let results = on_threads(threads, || {
                let result = items.try_each(|item| {
                    if item as usize >= threads {
                        later.fetch_add(1, Ordering::SeqCst);
                        return Ok(());
                    }
                    held.wait();
                    if item == 0 {
                        return Err(item);
                    }
                    stopped.wait();
                    Ok(())
                });
                if result.is_err() {
                    stopped.wait();
                }
                result
            });
            let results: Vec<Result<(), u32>> = results.into_iter().map(Result::unwrap).collect();
            assert_eq!(results.iter().filter(|result| result.is_err()).count(), 1);
            assert!(results.contains(&Err(0)), "{threads} threads");
            assert_eq!(later.load(Ordering::SeqCst), 0, "{threads} threads");
            assert_eq!(items.take(), None, "{threads} threads");
        }
    }

    #[test]
    fn the_error_returned_is_the_earliest_failing_items() {
        // Each of `threads` threads holds one of the first items (the barrier); items 1 and 3
        // fail, `first` of them before the other (which waits until it has failed). Item 1's
        // error is returned whichever failed first and whichever thread held it. Every state
        // comes back where nothing fails.
        for (threads, first) in [(4, 3), (5, 3), (8, 3), (4, 1), (8, 1)] {
            let held = Barrier::new(threads);
            let first_failed = AtomicUsize::new(0);
            let result = try_in_turn(
                0..1000u32,
                threads,
                Vec::new,
                |done: &mut Vec<u32>, place, item| {
                    assert_eq!(place, item as usize);
                    if (item as usize) < threads {
                        held.wait();
                    }
                    match item {
                        1 | 3 if item == first => {
                            first_failed.store(1, Ordering::SeqCst);
                            Err(format!("item {item}"))
                        }
                        1 | 3 => {
                            while first_failed.load(Ordering::SeqCst) == 0 {
                                std::thread::yield_now();
                            }
                            Err(format!("item {item}"))
                        }
                        _ => {
                            done.push(item);
                            Ok(())
                        }
                    }
                },
            );
            let case = format!("{threads} threads, item {first} failing first");
            assert_eq!(result, Err("item 1".to_string()), "{case}");
        }
        let states = try_in_turn(0..100u32, 3, Vec::new, |done, _, item| {
            done.push(item);
            Ok::<_, ()>(())
        })
        .unwrap();
        assert_eq!(states.len(), 3);
        let mut all: Vec<u32> = states.into_iter().flatten().collect();
        all.sort_unstable();
        assert_eq!(all, (0..100).collect::<Vec<_>>());
    }

    #[test]
    fn a_panicking_thread_is_reported_and_the_others_finish() {
        let finished = AtomicUsize::new(0);
        let calls = AtomicUsize::new(0);
        let results = on_threads(4, || {
            // The second thread to start panics.
            if calls.fetch_add(1, Ordering::SeqCst) == 1 {
                panic!("one thread fails");
            }
            finished.fetch_add(1, Ordering::SeqCst);
        });
        assert_eq!(results.iter().filter(|result| result.is_err()).count(), 1);
        assert_eq!(finished.load(Ordering::SeqCst), 3);
    }

    #[test]
    fn no_threads_asked_for_runs_one() {
        let runs = AtomicUsize::new(0);
        let results = on_threads(0, || runs.fetch_add(1, Ordering::SeqCst));
        assert_eq!(results.len(), 1);
        assert_eq!(runs.load(Ordering::SeqCst), 1);
    }
}
