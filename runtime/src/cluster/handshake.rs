//! The connections of a cluster, opened and authenticated here before timely gets them.
//!
//! Timely's own handshake is an 8-byte process index: anyone who can reach a process's port can
//! join its cluster, replay a recorded stream to it, or crash it. Here process `i` connects to
//! every process `j < i` and accepts from every `j > i` (timely's convention, so the sockets fit
//! [`initialize_networking_from_sockets`](timely::communication::allocator::zero_copy::initialize::initialize_networking_from_sockets)),
//! and on every connection both sides prove they hold the cluster's secret:
//!
//! 1. the connector sends `HELLO`: magic, its index, the index it wants, a fresh 32-byte nonce;
//! 2. the acceptor answers with its own `HELLO` (its index, the connector's, its own nonce);
//! 3. the connector sends HMAC-SHA256(secret, "connector" || both hellos), the acceptor checks it
//!    and answers HMAC-SHA256(secret, "acceptor" || both hellos), which the connector checks;
//! 4. each sends its facts (the run's fingerprint fields and its run token) as length-prefixed
//!    JSON with an HMAC over both hellos and the JSON.
//!
//! Both nonces are in every MAC, so bytes recorded from an earlier run prove nothing. A connection
//! that fails any step is refused with a reason on standard error and the wait goes on for the
//! real peer; every read and connect is bounded by the run's deadline. Once authenticated, facts
//! that differ stop the run naming each field that differs. What flows after the handshake (the
//! join's data) is neither encrypted nor authenticated: the README says so.

use std::collections::BTreeMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

/// The first bytes of every handshake: names the protocol and its version (4: keys of two
/// 32-bit integers travel as `Key::IntPair`, which a version-3 process would neither read nor
/// match with its own composite keys; 3: the facts' work costs weigh the link), so that
/// processes of different versions refuse each other here rather than misread each other.
const MAGIC: &[u8; 8] = b"SKJOIN\x00\x04";
const NONCE_BYTES: usize = 32;
const HELLO_BYTES: usize = MAGIC.len() + 8 + 8 + NONCE_BYTES;
const MAC_BYTES: usize = 32;
/// The most bytes of facts a peer may send; real ones are a few KiB.
const MAX_FACTS_BYTES: u32 = 1 << 20;

type HmacSha256 = Hmac<Sha256>;

/// The error of a side of the handshake that stopped because the other failed.
const STOPPED: &str = "stopped: the other side of the handshake failed";

/// What every process tells every other once authenticated.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Facts {
    /// Everything that must agree between processes, by a name a user understands.
    pub fields: BTreeMap<String, String>,
    /// A random token of this process; process 0's names the run (see [`Joined::run`]).
    pub token: String,
}

/// What this process needs to join the cluster.
#[derive(Clone)]
pub struct Handshake {
    /// This process's index.
    pub process: usize,
    /// Every process's `host:port`, by index.
    pub addresses: Vec<String>,
    /// The shared secret; empty with `--insecure`.
    pub secret: Vec<u8>,
    /// This process's facts.
    pub facts: Facts,
    /// When to give up waiting for peers.
    pub deadline: Instant,
    /// The timeout as the user gave it, for messages.
    pub timeout: Duration,
}

/// A formed cluster.
#[derive(Debug)]
pub struct Joined {
    /// A connected, authenticated socket to every other process, by index; `None` at this one.
    pub sockets: Vec<Option<TcpStream>>,
    /// Process 0's token: the same on every process, new for every run.
    pub run: String,
}

/// A fresh random token of `bytes` bytes, as hex.
pub fn random_hex(bytes: usize) -> std::io::Result<String> {
    let mut buffer = vec![0u8; bytes];
    getrandom::fill(&mut buffer).map_err(|error| std::io::Error::other(error.to_string()))?;
    Ok(hex(&buffer))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// Connects this process to every other, authenticated; an error (a peer that never came, or one
/// started with different arguments) is the message for exit code 5.
pub fn join(handshake: Handshake) -> Result<Joined, String> {
    let handshake = Arc::new(handshake);
    let me = handshake.process;
    let processes = handshake.addresses.len();
    let listener = if me + 1 < processes {
        let address = &handshake.addresses[me];
        let listener = TcpListener::bind(address.as_str()).map_err(|error| {
            format!(
                "process {me}: cannot listen on {address} (its line of the hostfile): {error}; \
                 is another program using that port?"
            )
        })?;
        listener
            .set_nonblocking(true)
            .map_err(|error| format!("process {me}: cannot poll {address}: {error}"))?;
        Some(listener)
    } else {
        None
    };
    let connector_failed = AtomicBool::new(false);
    let acceptor_failed = AtomicBool::new(false);
    let (lower, upper) = std::thread::scope(|scope| {
        let connecting = scope.spawn(|| {
            let connected = connect_all(&handshake, &acceptor_failed);
            connector_failed.store(connected.is_err(), Ordering::Release);
            connected
        });
        let upper = match &listener {
            Some(listener) => accept_all(&handshake, listener, &connector_failed),
            None => Ok(Vec::new()),
        };
        acceptor_failed.store(upper.is_err(), Ordering::Release);
        let lower = connecting
            .join()
            .unwrap_or_else(|_| Err("the connecting thread panicked".into()));
        (lower, upper)
    });
    // The error of the side that failed first: the other stops when it sees it.
    let (lower, upper) = match (lower, upper) {
        (Ok(lower), Ok(upper)) => (lower, upper),
        (Err(error), Ok(_)) | (Ok(_), Err(error)) => return Err(error),
        (Err(lower), Err(upper)) => {
            return Err(if lower == STOPPED { upper } else { lower });
        }
    };
    let run = match lower.first() {
        Some((_, facts)) => facts.token.clone(),
        None => handshake.facts.token.clone(),
    };
    let mut sockets: Vec<Option<TcpStream>> =
        lower.into_iter().map(|(socket, _)| Some(socket)).collect();
    sockets.push(None);
    sockets.extend(upper.into_iter().map(Some));
    for socket in sockets.iter().flatten() {
        // Timely's threads block on these for as long as the join runs.
        let ready = socket
            .set_read_timeout(None)
            .and(socket.set_write_timeout(None))
            .and(socket.set_nodelay(true))
            .and(socket.set_nonblocking(false));
        ready.map_err(|error| format!("process {me}: cannot set up a connection: {error}"))?;
    }
    Ok(Joined { sockets, run })
}

/// What went wrong with one connection.
enum Refusal {
    /// Not a peer of this run, or not yet: log it and keep waiting.
    Stranger(String),
    /// An authenticated peer of this run that disagrees: the run cannot go on.
    Fatal(String),
}

fn stranger(reason: impl Into<String>) -> Refusal {
    Refusal::Stranger(reason.into())
}

/// Connects to every process before this one, in order.
fn connect_all(
    handshake: &Handshake,
    stop: &AtomicBool,
) -> Result<Vec<(TcpStream, Facts)>, String> {
    let me = handshake.process;
    let mut connected = Vec::new();
    for peer in 0..me {
        let address = &handshake.addresses[peer];
        let mut last = String::from("no answer yet");
        let mut logged = String::new();
        loop {
            if stop.load(Ordering::Acquire) {
                return Err(STOPPED.into());
            }
            let left = handshake.deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(timed_out(
                    handshake,
                    &format!("process {peer} at {address}: {last}"),
                ));
            }
            match connect_once(handshake, peer, left) {
                Ok(done) => {
                    connected.push(done);
                    break;
                }
                Err(Refusal::Fatal(message)) => return Err(message),
                Err(Refusal::Stranger(reason)) => {
                    // A peer not listening yet is normal while the cluster forms; anything else
                    // is said once.
                    if reason != logged && !reason.contains("not listening yet") {
                        eprintln!(
                            "skewjoin: process {me}: the connection to process {peer} at \
                             {address} failed: {reason}; trying again"
                        );
                        logged = reason.clone();
                    }
                    // Not listening yet: soon; a wrong answer: less often.
                    let pause = if reason.contains("not listening yet") {
                        Duration::from_millis(100)
                    } else {
                        Duration::from_millis(500)
                    };
                    last = reason;
                    std::thread::sleep(pause.min(left));
                }
            }
        }
    }
    Ok(connected)
}

/// One attempt to connect to `peer` and authenticate.
fn connect_once(
    handshake: &Handshake,
    peer: usize,
    left: Duration,
) -> Result<(TcpStream, Facts), Refusal> {
    let address = &handshake.addresses[peer];
    let targets: Vec<SocketAddr> = address
        .to_socket_addrs()
        .map_err(|error| stranger(format!("cannot resolve it: {error}")))?
        .collect();
    let mut stream = None;
    let mut error = stranger("it resolves to no address");
    for target in targets {
        match TcpStream::connect_timeout(&target, left.min(Duration::from_secs(5))) {
            Ok(connected) => {
                stream = Some(connected);
                break;
            }
            Err(e) if e.kind() == ErrorKind::ConnectionRefused => {
                error = stranger("not listening yet");
            }
            Err(e) => error = stranger(e.to_string()),
        }
    }
    let mut stream = stream.ok_or(error)?;
    bound(&stream, handshake.deadline)?;
    let me = handshake.process;
    let mine = hello(me, peer)?;
    stream.write_all(&mine).map_err(io("sending the hello"))?;
    let mut theirs = [0u8; HELLO_BYTES];
    read(&mut stream, &mut theirs, "its hello")?;
    check_hello(&theirs, peer, me)?;
    let transcript = [&mine[..], &theirs[..]].concat();
    let proof = mac(&handshake.secret, b"connector", &transcript, &[]);
    stream.write_all(&proof).map_err(io("sending the proof"))?;
    let mut answer = [0u8; MAC_BYTES];
    read(&mut stream, &mut answer, "its proof")?;
    verify(&handshake.secret, b"acceptor", &transcript, &[], &answer)?;
    send_facts(&mut stream, handshake, b"connector facts", &transcript)?;
    let facts = receive_facts(&mut stream, handshake, b"acceptor facts", &transcript)?;
    compare(handshake, peer, &facts)?;
    Ok((stream, facts))
}

/// Accepts every process after this one, refusing strangers, until all came or the deadline.
fn accept_all(
    handshake: &Arc<Handshake>,
    listener: &TcpListener,
    connector_failed: &AtomicBool,
) -> Result<Vec<TcpStream>, String> {
    let me = handshake.process;
    let processes = handshake.addresses.len();
    let mut accepted: Vec<Option<TcpStream>> = (me + 1..processes).map(|_| None).collect();
    let (results, arrivals) = mpsc::channel();
    // A peer with a wrong secret retries several times a second: each reason from each host is
    // said once.
    let mut said = std::collections::HashSet::new();
    // A thread per connection, not scoped: one that says nothing must not hold up the others,
    // nor the start once every peer is in; it ends by the deadline.
    loop {
        if accepted.iter().all(Option::is_some) {
            return Ok(accepted.into_iter().flatten().collect());
        }
        let missing = || {
            let missing: Vec<String> = accepted
                .iter()
                .enumerate()
                .filter(|(_, socket)| socket.is_none())
                .map(|(offset, _)| (me + 1 + offset).to_string())
                .collect();
            format!(
                "no authenticated connection from process {}",
                missing.join(", ")
            )
        };
        if Instant::now() >= handshake.deadline {
            return Err(timed_out(handshake, &missing()));
        }
        if connector_failed.load(Ordering::Acquire) {
            // Its error is the one reported.
            return Err(STOPPED.into());
        }
        match listener.accept() {
            Ok((stream, from)) => {
                let results = results.clone();
                let handshake = Arc::clone(handshake);
                std::thread::spawn(move || {
                    let outcome = accept_one(&handshake, stream);
                    let _ = results.send((from, outcome));
                });
            }
            Err(error) if error.kind() == ErrorKind::WouldBlock => {}
            Err(error) => {
                eprintln!("skewjoin: process {me}: accepting a connection failed: {error}")
            }
        }
        while let Ok((from, outcome)) = arrivals.try_recv() {
            match outcome {
                Ok((peer, stream)) => {
                    let slot = &mut accepted[peer - me - 1];
                    if slot.is_some() {
                        eprintln!(
                            "skewjoin: process {me}: refused a second connection from \
                                 process {peer} ({from}): it is already connected"
                        );
                    } else {
                        *slot = Some(stream);
                    }
                }
                Err(Refusal::Fatal(message)) => return Err(message),
                Err(Refusal::Stranger(reason)) => {
                    if said.insert((from.ip(), reason.clone())) {
                        eprintln!(
                            "skewjoin: process {me}: refused a connection from {from}: \
                                 {reason}"
                        );
                    }
                }
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The acceptor's side of the handshake on one connection: the index of the authenticated peer.
fn accept_one(handshake: &Handshake, mut stream: TcpStream) -> Result<(usize, TcpStream), Refusal> {
    let me = handshake.process;
    stream
        .set_nonblocking(false)
        .map_err(io("setting up the connection"))?;
    bound(&stream, handshake.deadline)?;
    // The magic first: a stranger that sends a few bytes of something else is named as such.
    let mut theirs = [0u8; HELLO_BYTES];
    read(&mut stream, &mut theirs[..MAGIC.len()], "its hello")?;
    check_magic(&theirs)?;
    read(&mut stream, &mut theirs[MAGIC.len()..], "its hello")?;
    let peer = index(&theirs, MAGIC.len());
    let processes = handshake.addresses.len() as u64;
    if peer <= me as u64 || peer >= processes {
        return Err(stranger(format!(
            "it says it is process {peer}, but only processes {} to {} connect to process {me}",
            me + 1,
            processes - 1
        )));
    }
    let peer = peer as usize;
    check_hello(&theirs, peer, me)?;
    let mine = hello(me, peer)?;
    stream.write_all(&mine).map_err(io("sending the hello"))?;
    let transcript = [&theirs[..], &mine[..]].concat();
    let mut proof = [0u8; MAC_BYTES];
    read(&mut stream, &mut proof, "its proof")?;
    verify(&handshake.secret, b"connector", &transcript, &[], &proof)?;
    let answer = mac(&handshake.secret, b"acceptor", &transcript, &[]);
    stream.write_all(&answer).map_err(io("sending the proof"))?;
    let facts = receive_facts(&mut stream, handshake, b"connector facts", &transcript)?;
    send_facts(&mut stream, handshake, b"acceptor facts", &transcript)?;
    compare(handshake, peer, &facts)?;
    Ok((peer, stream))
}

/// Every read and write on `stream` ends by the deadline.
fn bound(stream: &TcpStream, deadline: Instant) -> Result<(), Refusal> {
    let left = deadline
        .saturating_duration_since(Instant::now())
        .max(Duration::from_millis(1));
    stream
        .set_read_timeout(Some(left))
        .and(stream.set_write_timeout(Some(left)))
        .map_err(io("setting a timeout"))
}

fn io(what: &'static str) -> impl Fn(std::io::Error) -> Refusal {
    move |error| stranger(format!("{what}: {error}"))
}

fn read(stream: &mut TcpStream, buffer: &mut [u8], what: &str) -> Result<(), Refusal> {
    stream.read_exact(buffer).map_err(|error| {
        stranger(match error.kind() {
            ErrorKind::UnexpectedEof => format!("it closed the connection before sending {what}"),
            ErrorKind::WouldBlock | ErrorKind::TimedOut => {
                format!("it did not send {what} before the connect timeout")
            }
            _ => format!("reading {what}: {error}"),
        })
    })
}

fn hello(from: usize, to: usize) -> Result<[u8; HELLO_BYTES], Refusal> {
    let mut hello = [0u8; HELLO_BYTES];
    hello[..MAGIC.len()].copy_from_slice(MAGIC);
    hello[8..16].copy_from_slice(&(from as u64).to_be_bytes());
    hello[16..24].copy_from_slice(&(to as u64).to_be_bytes());
    getrandom::fill(&mut hello[24..])
        .map_err(|error| Refusal::Fatal(format!("cannot make a random nonce: {error}")))?;
    Ok(hello)
}

fn index(hello: &[u8], at: usize) -> u64 {
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&hello[at..at + 8]);
    u64::from_be_bytes(bytes)
}

fn check_magic(hello: &[u8]) -> Result<(), Refusal> {
    if &hello[..MAGIC.len()] != MAGIC {
        let start = String::from_utf8_lossy(&hello[..MAGIC.len()]).into_owned();
        return Err(stranger(format!(
            "it does not speak skewjoin's handshake (it began with {start:?}); is it a skewjoin \
             of the same version?"
        )));
    }
    Ok(())
}

/// A hello from process `from` to process `to`.
fn check_hello(hello: &[u8], from: usize, to: usize) -> Result<(), Refusal> {
    check_magic(hello)?;
    let (said_from, said_to) = (index(hello, 8), index(hello, 16));
    if (said_from, said_to) != (from as u64, to as u64) {
        return Err(stranger(format!(
            "it says it is process {said_from} speaking to process {said_to}, but process {from} \
             speaking to process {to} was expected; do both use the same hostfile?"
        )));
    }
    Ok(())
}

fn mac(secret: &[u8], role: &[u8], transcript: &[u8], body: &[u8]) -> [u8; MAC_BYTES] {
    keyed(secret, role, transcript, body)
        .finalize()
        .into_bytes()
        .into()
}

fn keyed(secret: &[u8], role: &[u8], transcript: &[u8], body: &[u8]) -> HmacSha256 {
    let mut mac = HmacSha256::new_from_slice(secret).expect("HMAC takes a key of any length");
    for part in [role, transcript, body] {
        mac.update(&(part.len() as u64).to_be_bytes());
        mac.update(part);
    }
    mac
}

fn verify(
    secret: &[u8],
    role: &[u8],
    transcript: &[u8],
    body: &[u8],
    tag: &[u8],
) -> Result<(), Refusal> {
    keyed(secret, role, transcript, body)
        .verify_slice(tag)
        .map_err(|_| {
            stranger(
                "its proof is wrong: it does not hold this cluster's secret (or replays an old \
                 handshake); give every process the same --cluster-secret-file",
            )
        })
}

fn send_facts(
    stream: &mut TcpStream,
    handshake: &Handshake,
    role: &[u8],
    transcript: &[u8],
) -> Result<(), Refusal> {
    let body = serde_json::to_vec(&handshake.facts)
        .map_err(|error| Refusal::Fatal(format!("cannot encode this process's facts: {error}")))?;
    let tag = mac(&handshake.secret, role, transcript, &body);
    let message = [&(body.len() as u32).to_be_bytes()[..], &body, &tag].concat();
    stream.write_all(&message).map_err(io("sending the facts"))
}

fn receive_facts(
    stream: &mut TcpStream,
    handshake: &Handshake,
    role: &[u8],
    transcript: &[u8],
) -> Result<Facts, Refusal> {
    let mut length = [0u8; 4];
    read(stream, &mut length, "its facts")?;
    let length = u32::from_be_bytes(length);
    if length > MAX_FACTS_BYTES {
        return Err(stranger(format!(
            "it announced {length} bytes of facts, more than {MAX_FACTS_BYTES}"
        )));
    }
    let mut body = vec![0u8; length as usize];
    read(stream, &mut body, "its facts")?;
    let mut tag = [0u8; MAC_BYTES];
    read(stream, &mut tag, "the proof of its facts")?;
    verify(&handshake.secret, role, transcript, &body, &tag)?;
    serde_json::from_slice(&body)
        .map_err(|error| stranger(format!("its facts do not decode: {error}")))
}

/// Refuses to run with a peer whose fields differ, naming each one.
fn compare(handshake: &Handshake, peer: usize, theirs: &Facts) -> Result<(), Refusal> {
    let me = handshake.process;
    let mine = &handshake.facts.fields;
    let names: std::collections::BTreeSet<&String> =
        mine.keys().chain(theirs.fields.keys()).collect();
    let absent = "(not given)".to_string();
    let differences: Vec<String> = names
        .into_iter()
        .filter_map(|name| {
            let (a, b) = (
                mine.get(name).unwrap_or(&absent),
                theirs.fields.get(name).unwrap_or(&absent),
            );
            (a != b).then(|| format!("{name}: {a} here, {b} on process {peer}"))
        })
        .collect();
    if differences.is_empty() {
        return Ok(());
    }
    Err(Refusal::Fatal(format!(
        "process {me} and process {peer} were started with different join arguments or inputs: \
         {}; start every process with the same arguments (only --process may differ) on the same \
         input files",
        differences.join("; ")
    )))
}

fn timed_out(handshake: &Handshake, detail: &str) -> String {
    format!(
        "the {} processes of the cluster did not all connect within {} s ({detail}); check that \
         every process was started with the same --hostfile and the same cluster secret, that its \
         addresses are reachable from here, and raise --connect-timeout if processes start slowly",
        handshake.addresses.len(),
        handshake.timeout.as_secs()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(output: &str) -> Facts {
        Facts {
            fields: BTreeMap::from([("output".to_string(), output.to_string())]),
            token: random_hex(16).unwrap(),
        }
    }

    fn addresses(n: usize) -> Vec<String> {
        let listeners: Vec<TcpListener> = (0..n)
            .map(|_| TcpListener::bind("127.0.0.1:0").unwrap())
            .collect();
        listeners
            .iter()
            .map(|listener| listener.local_addr().unwrap().to_string())
            .collect()
    }

    /// Runs three processes' handshakes with the given secrets and outputs.
    fn run(secrets: [&'static [u8]; 3], outputs: [&'static str; 3]) -> Vec<Result<Joined, String>> {
        let addresses = addresses(3);
        let deadline = Instant::now() + Duration::from_secs(3);
        let handles: Vec<_> = (0..3)
            .map(|process| {
                let addresses = addresses.clone();
                std::thread::spawn(move || {
                    join(Handshake {
                        process,
                        addresses,
                        secret: secrets[process].to_vec(),
                        facts: facts(outputs[process]),
                        deadline,
                        timeout: Duration::from_secs(3),
                    })
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    }

    #[test]
    fn processes_with_the_secret_form_a_full_mesh_and_share_a_run() {
        let joined = run([b"s3cret-0123456789"; 3], ["a"; 3]);
        let joined: Vec<Joined> = joined.into_iter().map(Result::unwrap).collect();
        for (process, one) in joined.iter().enumerate() {
            assert_eq!(one.sockets.len(), 3);
            for (peer, socket) in one.sockets.iter().enumerate() {
                assert_eq!(socket.is_some(), peer != process);
            }
            assert_eq!(one.run, joined[0].run);
        }
    }

    #[test]
    fn a_wrong_secret_or_different_fields_are_refused() {
        let joined = run(
            [b"right-secret-1234", b"right-secret-1234", b"wrong"],
            ["a"; 3],
        );
        assert!(joined[2]
            .as_ref()
            .unwrap_err()
            .contains("did not all connect"));
        let joined = run([b"k"; 3], ["a", "a", "b"]);
        let error = joined[2].as_ref().unwrap_err();
        assert!(error.contains("output: b here, a on process"), "{error}");
    }
}
