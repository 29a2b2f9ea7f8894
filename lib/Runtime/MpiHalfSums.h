//===- MpiHalfSums.h - FP16/BF16 sums as MPI operations --------*- C++ -*-===//
//
// The sums of 16-bit floats the data-parallel communicators give MPI (which
// has no half type): each pair widened to FP32, added and rounded to
// nearest even, so every rank of a reduction gets the same bits. Shared by
// the MPI communicator (MpiComm.cpp) and the CUDA execution's NCCL over
// MPI (CudaSim/Nccl.cpp), whose sums must match it bit for bit.
//
//===----------------------------------------------------------------------===//

#ifndef AMPC_RUNTIME_MPIHALFSUMS_H
#define AMPC_RUNTIME_MPIHALFSUMS_H

#include "ampc/Kernels/Common/Float16.h"

// Open MPI's and MPICH's C++ bindings are not wanted (as in the .cpp files).
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#ifndef MPICH_SKIP_MPICXX
#define MPICH_SKIP_MPICXX 1
#endif
#include <mpi.h>

#include <cstdint>

namespace ampc::mpi {

template <float (*Load)(uint16_t), uint16_t (*Store)(float)>
void sumHalves(void *in, void *inout, int *len, MPI_Datatype *) {
  const auto *a = static_cast<const uint16_t *>(in);
  auto *b = static_cast<uint16_t *>(inout);
  for (int i = 0; i < *len; ++i)
    b[i] = Store(Load(a[i]) + Load(b[i]));
}

/// The FP16 and BF16 sums as commutative MPI operations, made once (after
/// MPI_Init) and kept for the process.
struct HalfSums {
  MPI_Op f16 = MPI_OP_NULL, bf16 = MPI_OP_NULL;
  void create() {
    if (f16 != MPI_OP_NULL)
      return;
    MPI_Op_create(&sumHalves<numeric::f16BitsToF32, numeric::f32ToF16Bits>,
                  /*commute=*/1, &f16);
    MPI_Op_create(&sumHalves<numeric::bf16BitsToF32, numeric::f32ToBf16Bits>,
                  /*commute=*/1, &bf16);
  }
};

} // namespace ampc::mpi

#endif // AMPC_RUNTIME_MPIHALFSUMS_H
