//===- Rendezvous.h - rank 0's bytes to every rank over TCP -----*- C++ -*-===//
//
// How the ranks of a job that no MPI launched (torchrun sets RANK,
// WORLD_SIZE, MASTER_ADDR and MASTER_PORT) share what rank 0 made, NCCL's
// unique id (issue 41, docs/distributed.md): rank 0 listens on a TCP port,
// every other rank connects to MASTER_ADDR, says who it is, and receives
// the bytes. Plain POSIX sockets: the NCCL communicator links it, and the
// runtime's unit tests run it on 127.0.0.1.
//
// The exchange: a rank sends "AMPCRDV1", its rank and the job's size (two
// little-endian uint32s); rank 0 answers "AMPCRDV1", a status (0 ok) and a
// length, then the bytes (status 0) or a one-line reason (status 1: a size
// that differs from rank 0's, a rank out of range or already seen).
//
//===----------------------------------------------------------------------===//

#ifndef AMPC_RUNTIME_RENDEZVOUS_H
#define AMPC_RUNTIME_RENDEZVOUS_H

#include <cstddef>
#include <string>

namespace ampc {

/// Rank 0's `count` bytes at `bytes` to each of the `size` ranks: rank 0
/// listens on `port` (every interface) until the `size` - 1 others have
/// them; another rank connects to `host`:`port` (retrying while rank 0 is
/// not listening yet) and overwrites `bytes`. Each side gives up after
/// `timeoutMs` milliseconds. Returns "" or a one-line error naming the
/// ranks concerned.
std::string tcpBroadcast(const std::string &host, int port, int rank, int size,
                         void *bytes, size_t count, int timeoutMs);

} // namespace ampc

#endif // AMPC_RUNTIME_RENDEZVOUS_H
