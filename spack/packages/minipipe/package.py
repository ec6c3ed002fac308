# Spack recipe for miniPipe, the pipeline-parallel GPT-2 training mini-app (Kokkos + MPI + HDF5).
# Use it from a checkout: `spack repo add <checkout>/spack`, then `spack dev-build minipipe@main`.
from spack.package import *


class Minipipe(CMakePackage, CudaPackage, ROCmPackage):
    """miniPipe trains a GPT-2-style transformer split into pipeline stages: stage compute in
    Kokkos, boundary tensors over MPI, every pipeline schedule variant, and HDF5 dumps that
    compare bit for bit across schedules, stage counts and backends."""

    # No public release archive yet: build from a local checkout (spack dev-build / spack develop).
    version("main")

    variant("openmp", default=False, description="Use a Kokkos with the OpenMP backend")
    variant("double", default=False, description="Train in double precision (MINIPIPE_DOUBLE)")
    variant("benchmarks", default=False, description="Build the Google Benchmark kernel benchmarks")
    conflicts("+cuda", when="+rocm", msg="Kokkos builds one device backend at a time")

    depends_on("c", type="build")
    depends_on("cxx", type="build")
    depends_on("cmake@3.16:", type="build")

    # The backend is the Kokkos install's; miniPipe asks for the one the variants name.
    depends_on("kokkos@3.4:")
    depends_on("kokkos-kernels@3.4:")
    depends_on("kokkos+openmp", when="+openmp")
    depends_on("kokkos+cuda+cuda_lambda+wrapper", when="+cuda")
    depends_on("kokkos+rocm", when="+rocm")
    for _arch in CudaPackage.cuda_arch_values:
        depends_on("kokkos cuda_arch={0}".format(_arch), when="+cuda cuda_arch={0}".format(_arch))
    for _target in ROCmPackage.amdgpu_targets:
        depends_on("kokkos amdgpu_target={0}".format(_target), when="+rocm amdgpu_target={0}".format(_target))

    depends_on("mpi")
    depends_on("hdf5+mpi")  # the dump is written collectively through parallel HDF5
    depends_on("blas")
    depends_on("cli11")
    depends_on("tomlplusplus")
    depends_on("nlohmann-json@3:")
    depends_on("googletest", type="test")
    depends_on("benchmark", when="+benchmarks")

    def cmake_args(self):
        spec = self.spec
        args = [
            self.define_from_variant("MINIPIPE_DOUBLE", "double"),
            self.define_from_variant("MINIPIPE_BUILD_BENCHMARKS", "benchmarks"),
            self.define("MINIPIPE_BUILD_TESTS", self.run_tests),
            # Spack's compiler wrappers add the target's -march; the deterministic kernels need
            # only that FMA instructions exist, not the build host's ISA.
            self.define("MINIPIPE_NATIVE", False),
            self.define("Kokkos_ROOT", spec["kokkos"].prefix),
            self.define("KokkosKernels_ROOT", spec["kokkos-kernels"].prefix),
            self.define("HDF5_PREFER_PARALLEL", True),
        ]
        if spec.satisfies("+cuda") or spec.satisfies("+rocm"):
            # nvcc_wrapper (CUDA) or hipcc (ROCm), as the Kokkos install was built with.
            args.append(self.define("CMAKE_CXX_COMPILER", spec["kokkos"].kokkos_cxx))
        return args
