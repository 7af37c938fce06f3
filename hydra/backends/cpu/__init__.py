"""CPU backend: lowers predicated SSA to LLVM IR and runs it through llvmlite's JIT."""
