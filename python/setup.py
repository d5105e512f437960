"""Builds hipgrad's PyTorch extension against the installed PyTorch:

    python3 -m pip install --no-build-isolation ./python

The ops' kernels are the library's instances (instances/*.cpp), each compiled once by nvcc into
the extension. HIPGRAD_CUDA_ARCH picks the target (default 90a: the Hopper paths need the `a`
target; other values such as 80 or 90 build the mma.sync paths). MAX_JOBS bounds the parallel
build (PyTorch's variable)."""
import glob
import os

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CUDAExtension

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
ARCH = os.environ.get("HIPGRAD_CUDA_ARCH", "90a")


def instance_wrappers():
    """One .cu file per instance source, so that nvcc compiles it (setuptools gives .cpp files to
    the host compiler). Written only where its text changes, so rebuilds stay incremental."""
    folder = os.path.join(HERE, "build", "instances")
    os.makedirs(folder, exist_ok=True)
    wrappers = []
    for source in sorted(glob.glob(os.path.join(ROOT, "instances", "*.cpp"))):
        wrapper = os.path.join(folder, os.path.basename(source)[:-4] + ".cu")
        text = '#include "%s"\n' % os.path.relpath(source, folder)
        if not os.path.exists(wrapper) or open(wrapper).read() != text:
            with open(wrapper, "w") as f:
                f.write(text)
        wrappers.append(os.path.relpath(wrapper, HERE))
    return wrappers


def running_libstdcxx():
    """The libstdc++ shared object that this process, PyTorch loaded, runs with (Linux), or None.

    Linked by its path ahead of the compiler's own -lstdc++: a toolchain whose libstdc++ is found
    as a static archive would otherwise copy parts of it into the extension, and with the
    process's libstdc++ also loaded the two copies' locale data mix (formatting an integer into a
    stream, as every error message with a number does, then crashes)."""
    if not os.path.exists("/proc/self/maps"):
        return None
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split()[-1]
            if os.path.basename(path).startswith("libstdc++.so") and os.path.exists(path):
                return path
    return None


LIBSTDCXX = running_libstdcxx()
csrc = os.path.join("hipgrad", "csrc")
sources = [os.path.join(csrc, name) for name in ("ops.cpp", "autograd.cpp", "bridge_conv.cu", "bridge_groupnorm.cu")]
includes = [os.path.join(ROOT, "include"), os.path.join(ROOT, "instances"), os.path.join(HERE, csrc)]

setup(
    name="hipgrad",
    version="0.1.0",
    description="hipgrad's GroupNorm and grouped convolution backward kernels as PyTorch ops and modules",
    packages=["hipgrad"],
    ext_modules=[
        CUDAExtension(
            name="hipgrad._C",
            sources=sources + instance_wrappers(),
            include_dirs=includes,
            extra_link_args=[LIBSTDCXX] if LIBSTDCXX else [],
            extra_compile_args={
                "cxx": ["-O2", "-std=c++17"],
                "nvcc": ["-O3", "-std=c++17", "-gencode=arch=compute_%s,code=sm_%s" % (ARCH, ARCH)],
            },
        )
    ],
    cmdclass={"build_ext": BuildExtension},
    python_requires=">=3.9",
)
