# check_spack_recipe.py PACKAGE_PY PYC_OUT: byte-compiles the Spack recipe, then loads it against a
# small stand-in for spack.package that records directives, and checks variants and dependency names.
import py_compile
import sys
import types

recipe, pyc = sys.argv[1], sys.argv[2]
py_compile.compile(recipe, cfile=pyc, doraise=True)

# Dependency names as the Spack builtin repository spells them (packages and virtuals).
SPACK_NAMES = {"c", "cxx", "cmake", "kokkos", "kokkos-kernels", "mpi", "hdf5", "blas", "cli11", "tomlplusplus",
               "nlohmann-json",
               "googletest", "benchmark"}
recorded = {"variant": [], "depends_on": [], "conflicts": [], "version": []}


def directive(kind):
    def record(*args, **kwargs):
        recorded[kind].append((args, kwargs))
    return record


class Spec:
    """A concrete spec with every variant off, enough for cmake_args()."""

    prefix = "/opt/fake"

    def satisfies(self, constraint):
        return False

    def __getitem__(self, name):
        return self


class PackageBase:
    run_tests = False

    def __init__(self):
        self.spec = Spec()

    def define(self, name, value):
        return "-D{0}={1}".format(name, "ON" if value is True else "OFF" if value is False else value)

    def define_from_variant(self, name, variant):
        return self.define(name, False)


class CMakePackage(PackageBase):
    pass


class CudaPackage:  # mixins, as in Spack: they add variants, not a build system
    cuda_arch_values = ("70", "80", "90")


class ROCmPackage:
    amdgpu_targets = ("gfx90a", "gfx942")


fake = types.ModuleType("spack.package")
fake.CMakePackage, fake.CudaPackage, fake.ROCmPackage = CMakePackage, CudaPackage, ROCmPackage
for kind in recorded:
    setattr(fake, kind, directive(kind))
fake.__all__ = ["CMakePackage", "CudaPackage", "ROCmPackage"] + list(recorded)
sys.modules["spack"] = types.ModuleType("spack")
sys.modules["spack.package"] = fake

namespace = {}
exec(compile(open(recipe).read(), recipe, "exec"), namespace)
failures = []
cls = namespace.get("Minipipe")
if cls is None or not issubclass(cls, CMakePackage):
    failures.append("no class Minipipe(CMakePackage, ...) in the recipe")

variants = {args[0] for args, _ in recorded["variant"]} | {"cuda", "rocm"}  # cuda, rocm: from the mixins
for v in ("cuda", "rocm", "openmp", "double"):
    if v not in variants:
        failures.append("variant '{0}' missing".format(v))
if cls is not None and not (issubclass(cls, CudaPackage) and issubclass(cls, ROCmPackage)):
    failures.append("Minipipe must derive from CudaPackage and ROCmPackage (variants cuda, rocm)")

deps = [args[0] for args, _ in recorded["depends_on"]]
for spec in deps:
    name = spec.split("@")[0].split("+")[0].split("~")[0].split(" ")[0]
    if name not in SPACK_NAMES:
        failures.append("depends_on('{0}'): '{1}' is not a Spack package name this check knows".format(spec, name))
for needed in ("kokkos@3.4:", "kokkos-kernels@3.4:", "mpi", "hdf5+mpi", "blas", "cli11", "tomlplusplus",
               "nlohmann-json@3:"):
    if needed not in deps:
        failures.append("depends_on('{0}') missing".format(needed))

if cls is not None:
    args = cls().cmake_args()
    for flag in ("-DMINIPIPE_DOUBLE=OFF", "-DMINIPIPE_BUILD_TESTS=OFF", "-DMINIPIPE_NATIVE=OFF"):
        if flag not in args:
            failures.append("cmake_args() lacks {0}: {1}".format(flag, args))

for f in failures:
    print("FAIL:", f)
if failures:
    sys.exit(1)
print("PASS: {0} variants, {1} depends_on, cmake_args {2}".format(len(recorded["variant"]), len(deps), args))
