# ctest torch_cuda_glue_compiles: compiles (syntax only) the LibTorch front end's CUDA glue, the
# code behind HVD_TORCH_CUDA (CUDA ready events, the output allocator's allocation events), against
# this machine's LibTorch and CUDA headers, where the LibTorch found has no CUDA and so builds
# none of it. A typo there then fails CI instead of waiting for a GPU machine. Both standards a
# LibTorch build may use (cmake/HvdTorchStandard.cmake): C++20 is what current PyTorch needs, and
# what the GPU machine's PyTorch builds with.
#   cmake -DCXX=... -DFLAGS="..." -DINCLUDES="a;b" -DSOURCES="x.cc;y.cc" -P torch_cuda_glue_check.cmake
cmake_minimum_required(VERSION 3.18)
set(args -fsyntax-only -DHVD_TORCH_CUDA=1 -Wall -Wextra)
separate_arguments(extra UNIX_COMMAND "${FLAGS}")
list(APPEND args ${extra})
foreach(dir IN LISTS INCLUDES)
  list(APPEND args -I${dir})
endforeach()
foreach(standard 17 20)
  foreach(source IN LISTS SOURCES)
    execute_process(COMMAND ${CXX} -std=c++${standard} ${args} ${source}
      RESULT_VARIABLE rc ERROR_VARIABLE errors OUTPUT_VARIABLE out)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "${source} does not compile as C++${standard} with HVD_TORCH_CUDA=1:\n${errors}")
    endif()
    message(STATUS "${source}: compiles as C++${standard} with HVD_TORCH_CUDA=1")
  endforeach()
endforeach()
