//! The containers an exchange of every input record sends: 64 KiB of records, not timely's 8 KiB.
//!
//! Timely's exchange pact cuts each container it is given into one container per worker, of
//! its builder's capacity: with its default (8 KiB, 204 routed records of 40 bytes) a uniform
//! 10M x 10M join sent about 100,000 messages, each a container handed to a channel, scheduled
//! and drained on the other side. [`BatchBuilder`] gathers [`EXCHANGE_BATCH_BYTES`] of records
//! before it sends them, eight times fewer messages. And the pact copied every record once
//! more, from the container it was given into the one for the record's worker, though
//! [`route`](crate::route::route) had just chosen that worker: [`batch_exchange`] sends a
//! container whose records all go to one worker as it is, and `route` makes its containers so.
//! The partitioned join's pacts (every strategy that joins in it: Shuffle-Join, VPRP, AM-Join,
//! ...) and IB-Join's use it. Routers other than `route` (VPRP's `route_by_ranges`, AM-Join's)
//! give containers of records for several workers, which go record by record as before.
//!
//! ```
//! use skewjoin_operators::exchange::batch_builder::{batch_records, BatchBuilder};
//! use timely::container::{ContainerBuilder, PushInto};
//!
//! let mut builder = BatchBuilder::<u64>::default();
//! let records = batch_records::<u64>() as u64 + 5;
//! for record in 0..records {
//!     builder.push_into(record);
//! }
//! let mut sent = Vec::new();
//! while let Some(full) = builder.extract() {
//!     sent.push(std::mem::take(full));
//! }
//! assert_eq!(sent.len(), 1, "one full container so far");
//! while let Some(rest) = builder.finish() {
//!     sent.push(std::mem::take(rest));
//! }
//! let all: Vec<u64> = sent.into_iter().flatten().collect();
//! assert_eq!(all, (0..records).collect::<Vec<_>>());
//! ```

use std::collections::VecDeque;

use timely::container::{ContainerBuilder, PushInto};
use timely::dataflow::channels::pact::DistributorPact;
use timely::dataflow::channels::pushers::exchange::Distributor;
use timely::dataflow::channels::Message;
use timely::progress::Stamp;

/// Bytes of records an exchange gathers for one worker before it sends them.
pub const EXCHANGE_BATCH_BYTES: usize = 64 << 10;

/// Records of type `T` in one container: [`EXCHANGE_BATCH_BYTES`] of them, at least one (as
/// many as bytes for a type of no size, as timely does).
pub const fn batch_records<T>() -> usize {
    let size = std::mem::size_of::<T>();
    if size == 0 {
        EXCHANGE_BATCH_BYTES
    } else if size >= EXCHANGE_BATCH_BYTES {
        1
    } else {
        EXCHANGE_BATCH_BYTES / size
    }
}

/// The worker an exchange sends a record of hash `hash` to: `hash` modulo the workers, as
/// timely's own exchange pact does, with a mask where the workers are a power of two.
#[derive(Clone, Copy, Debug)]
pub struct Workers {
    count: u64,
    mask: Option<u64>,
}

impl Workers {
    /// `count` workers (at least one).
    pub fn new(count: usize) -> Workers {
        let count = count.max(1) as u64;
        Workers {
            count,
            mask: count.is_power_of_two().then(|| count - 1),
        }
    }

    /// The worker of hash `hash`.
    #[inline]
    pub fn of(self, hash: u64) -> usize {
        match self.mask {
            Some(mask) => (hash & mask) as usize,
            None => (hash % self.count) as usize,
        }
    }
}

/// An exchange pact that sends each record to the worker of its hash ([`Workers::of`]), in
/// containers of [`batch_records`] records; a container whose records all go to one worker (as
/// [`route`](crate::route::route) makes them) is sent whole, without a copy.
pub type BatchExchange<T, F> = DistributorPact<Box<dyn FnOnce(usize) -> BatchDistributor<T, F>>>;

/// The [`BatchExchange`] of `hash`.
pub fn batch_exchange<T, F>(hash: F) -> BatchExchange<T, F>
where
    T: 'static,
    F: FnMut(&T) -> u64 + 'static,
{
    DistributorPact(Box::new(move |peers| BatchDistributor {
        workers: Workers::new(peers),
        builders: (0..peers).map(|_| BatchBuilder::default()).collect(),
        hash,
    }))
}

/// The distributor behind [`BatchExchange`].
pub struct BatchDistributor<T, F> {
    workers: Workers,
    builders: Vec<BatchBuilder<T>>,
    hash: F,
}

impl<T: 'static, F: FnMut(&T) -> u64> Distributor<Vec<T>> for BatchDistributor<T, F> {
    fn partition<S: Clone, P: timely::communication::Push<Message<S, Vec<T>>>>(
        &mut self,
        container: &mut Vec<T>,
        stamp: &Stamp<S>,
        pushers: &mut [P],
    ) {
        let workers = self.workers;
        if let Some(first) = container.first() {
            let worker = workers.of((self.hash)(first));
            // A mixed container (VPRP's and AM-Join's routers give them) stops the check at its
            // first record for another worker, rather than hashing every record twice.
            let hash = &mut self.hash;
            if container[1..]
                .iter()
                .all(|record| workers.of(hash(record)) == worker)
            {
                // Its records are counted where it arrives, as many as were given here.
                Message::push_at(container, stamp.clone(), &mut pushers[worker]);
                container.clear();
                return;
            }
        }
        for record in container.drain(..) {
            let worker = workers.of((self.hash)(&record));
            self.builders[worker].push_into(record);
            while let Some(full) = self.builders[worker].extract() {
                Message::push_at(full, stamp.clone(), &mut pushers[worker]);
            }
        }
    }

    fn flush<S: Clone, P: timely::communication::Push<Message<S, Vec<T>>>>(
        &mut self,
        stamp: &Stamp<S>,
        pushers: &mut [P],
    ) {
        for (builder, pusher) in self.builders.iter_mut().zip(pushers) {
            while let Some(rest) = builder.finish() {
                Message::push_at(rest, stamp.clone(), pusher);
            }
        }
    }

    fn relax(&mut self) {
        self.builders.iter_mut().for_each(BatchBuilder::relax);
    }
}

/// Builds `Vec` containers of [`batch_records`] records, in the order they were pushed. The
/// container last handed out is kept and, cleared, filled next: a pusher may give it back with
/// its allocation (a channel to another process does).
#[derive(Debug)]
pub struct BatchBuilder<T> {
    /// The container being filled.
    current: Vec<T>,
    /// The container last handed out, for reuse once the caller has taken its records.
    spare: Option<Vec<T>>,
    /// Full containers not yet handed out.
    full: VecDeque<Vec<T>>,
}

impl<T> Default for BatchBuilder<T> {
    fn default() -> Self {
        BatchBuilder {
            current: Vec::new(),
            spare: None,
            full: VecDeque::new(),
        }
    }
}

impl<T> PushInto<T> for BatchBuilder<T> {
    #[inline]
    fn push_into(&mut self, record: T) {
        if self.current.capacity() == 0 {
            self.start();
        }
        self.current.push(record);
        if self.current.len() >= batch_records::<T>() {
            self.full.push_back(std::mem::take(&mut self.current));
        }
    }
}

impl<T> BatchBuilder<T> {
    /// Starts a container, in the spare one where there is one.
    #[cold]
    fn start(&mut self) {
        let mut container = self.spare.take().unwrap_or_default();
        container.clear();
        container.reserve(batch_records::<T>());
        self.current = container;
    }
}

impl<T: 'static> ContainerBuilder for BatchBuilder<T> {
    type Container = Vec<T>;

    #[inline]
    fn extract(&mut self) -> Option<&mut Vec<T>> {
        self.spare = Some(self.full.pop_front()?);
        self.spare.as_mut()
    }

    #[inline]
    fn finish(&mut self) -> Option<&mut Vec<T>> {
        if !self.current.is_empty() {
            self.full.push_back(std::mem::take(&mut self.current));
        }
        self.spare = self.full.pop_front();
        self.spare.as_mut()
    }

    fn relax(&mut self) {
        // Between times nothing is held for reuse: an operator over many timestamps does not
        // keep a 64 KiB container per worker and pact while it waits.
        self.spare = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pushes `records` in turn, taking what `extract` gives after each push, then what
    /// `finish` gives: every container taken.
    fn containers(records: u32) -> Vec<Vec<u32>> {
        let mut builder = BatchBuilder::default();
        let mut taken = Vec::new();
        for record in 0..records {
            builder.push_into(record);
            while let Some(full) = builder.extract() {
                taken.push(std::mem::take(full));
            }
        }
        while let Some(rest) = builder.finish() {
            taken.push(std::mem::take(rest));
        }
        taken
    }

    #[test]
    fn every_record_comes_out_once_in_order_in_full_containers() {
        let per = batch_records::<u32>() as u32;
        for records in [0, 1, per - 1, per, per + 1, 3 * per, 3 * per + 7] {
            let taken = containers(records);
            let all: Vec<u32> = taken.iter().flatten().copied().collect();
            assert_eq!(all, (0..records).collect::<Vec<_>>(), "{records} records");
            let (last, full) = taken
                .split_last()
                .map_or((None, &[][..]), |(l, f)| (Some(l), f));
            assert!(
                full.iter().all(|c| c.len() == per as usize),
                "{records} records"
            );
            assert!(last.is_none_or(|c| !c.is_empty() && c.len() <= per as usize));
        }
    }

    #[test]
    fn a_container_handed_back_with_records_is_cleared_before_reuse() {
        let per = batch_records::<u32>() as u32;
        let mut builder = BatchBuilder::default();
        for record in 0..per {
            builder.push_into(record);
        }
        // The caller leaves the records in the container (timely hands back the container
        // a channel did not take): the next container must not carry them.
        assert_eq!(builder.extract().map(|c| c.len()), Some(per as usize));
        builder.push_into(u32::MAX);
        assert_eq!(builder.finish().cloned(), Some(vec![u32::MAX]));
        assert!(builder.finish().is_none());
    }

    /// A pusher that keeps every container it is given.
    struct Kept(Vec<Vec<u64>>);

    impl timely::communication::Push<Message<u32, Vec<u64>>> for Kept {
        fn push(&mut self, message: &mut Option<Message<u32, Vec<u64>>>) {
            if let Some(message) = message.take() {
                self.0.push(message.data);
            }
        }
    }

    #[test]
    fn one_workers_container_passes_whole_and_a_mixed_one_goes_record_by_record() {
        let stamp = Stamp::from_elem(0u32);
        for workers in [1, 2, 3, 4, 8] {
            let mut distributor = BatchDistributor {
                workers: Workers::new(workers),
                builders: (0..workers).map(|_| BatchBuilder::default()).collect(),
                hash: |record: &u64| *record,
            };
            let mut pushers: Vec<Kept> = (0..workers).map(|_| Kept(Vec::new())).collect();
            // Every record of this one goes to worker 1 % workers: sent as it is, at once.
            let one: Vec<u64> = (0..10).map(|i| (i * workers + 1) as u64).collect();
            let mut container = one.clone();
            distributor.partition(&mut container, &stamp, &mut pushers);
            assert!(
                container.is_empty(),
                "{workers} workers: the container is taken"
            );
            for (worker, pusher) in pushers.iter_mut().enumerate() {
                let expected = if worker == 1 % workers {
                    vec![one.clone()]
                } else {
                    vec![]
                };
                assert_eq!(pusher.0, expected, "{workers} workers, worker {worker}");
                pusher.0.clear();
            }
            // This one's records go everywhere: each to the worker of its hash, in order.
            let records = 3 * batch_records::<u64>() as u64 + 11;
            let mut container: Vec<u64> = (0..records).collect();
            distributor.partition(&mut container, &stamp, &mut pushers);
            distributor.flush(&stamp, &mut pushers);
            assert!(container.is_empty());
            for (worker, pusher) in pushers.iter().enumerate() {
                let got: Vec<u64> = pusher.0.iter().flatten().copied().collect();
                let expected: Vec<u64> = (0..records)
                    .filter(|record| *record as usize % workers == worker)
                    .collect();
                assert_eq!(got, expected, "{workers} workers, worker {worker}");
            }
        }
    }

    #[test]
    fn sizes_are_bounded() {
        assert_eq!(batch_records::<[u8; 40]>(), EXCHANGE_BATCH_BYTES / 40);
        assert_eq!(batch_records::<()>(), EXCHANGE_BATCH_BYTES);
        assert_eq!(batch_records::<[u8; 1 << 20]>(), 1);
    }
}
