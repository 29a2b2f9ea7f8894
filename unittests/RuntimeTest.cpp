//===- RuntimeTest.cpp - the runtime C API against fixture model libraries ===//
//
// The fixture libraries in unittests/fixtures implement the model ABI by hand
// (code generation comes later). Every failing call is checked for both its
// status and the text of ampc_last_error().
//
//===----------------------------------------------------------------------===//

#include "ampc/Runtime/ModelAbi.h"
#include "ampc/Runtime/ampc.h"

#include "BlasCore.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <elf.h>
#include <fstream>
#include <iterator>
#include <string>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>
#include <vector>

extern "C" size_t runtime_test_c_layout(size_t *out);

// What the fixture libraries saw, and a switch one of them reads: they
// refer to these weakly, and the executable exports them to the libraries
// it loads (fixtures/observed.list), so every private copy the runtime
// loads writes the same variables.
extern "C" {
#define AMPC_OBSERVED __attribute__((visibility("default")))
AMPC_OBSERVED int32_t fixture_affine_seen_num_threads = -1;
AMPC_OBSERVED void *fixture_affine_seen_cuda_stream;
AMPC_OBSERVED int32_t fixture_affine_releases;
AMPC_OBSERVED int32_t fixture_fails_releases;
AMPC_OBSERVED int32_t fixture_gradients_fail;
#undef AMPC_OBSERVED
}

namespace {

std::string fixturePath(const char *name) {
  return std::string(AMPC_FIXTURE_DIR) + "/" + name + ".so";
}

/// Passes when this thread's last error contains `expected`, and shows the
/// whole message when it does not.
::testing::AssertionResult lastErrorHas(const char *expected) {
  std::string message = ampc_last_error();
  if (message.find(expected) != std::string::npos)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "ampc_last_error() is \"" << message << "\", expected it to contain \""
         << expected << "\"";
}

/// A loaded fixture_affine and tensors that match it.
class AffineModel : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_EQ(ampc_model_load(fixturePath("fixture_affine").c_str(), nullptr,
                              &model),
              AMPC_OK)
        << ampc_last_error();
    ASSERT_NE(model, nullptr);
    input = {AMPC_DTYPE_F32, 2, xShape, x, sizeof(x)};
    outputs[0] = {AMPC_DTYPE_F32, 2, xShape, y, sizeof(y)};
    outputs[1] = {AMPC_DTYPE_F32, 0, nullptr, &sum, sizeof(sum)};
  }
  void TearDown() override { ampc_model_release(model); }

  ampc_status infer() { return ampc_model_infer(model, &input, 1, outputs, 2); }

  ampc_model *model = nullptr;
  int64_t xShape[2] = {2, 3};
  float x[6] = {1, 2, 3, 4, 5, 6};
  float y[6] = {};
  float sum = 0;
  ampc_tensor input;
  ampc_tensor outputs[2];
};

//===----------------------------------------------------------------------===//
// Status, dtypes, versions, headers
//===----------------------------------------------------------------------===//

TEST(RuntimeBasics, StatusStrings) {
  const std::pair<ampc_status, const char *> expected[] = {
      {AMPC_OK, "ok"},
      {AMPC_ERROR_INVALID_ARGUMENT, "invalid argument"},
      {AMPC_ERROR_NOT_FOUND, "not found"},
      {AMPC_ERROR_ABI_MISMATCH, "ABI mismatch"},
      {AMPC_ERROR_SHAPE_MISMATCH, "shape mismatch"},
      {AMPC_ERROR_DTYPE_MISMATCH, "dtype mismatch"},
      {AMPC_ERROR_UNSUPPORTED, "unsupported"},
      {AMPC_ERROR_EXECUTION, "execution failed"},
      {AMPC_ERROR_IO, "I/O error"},
      {AMPC_ERROR_CORRUPT, "corrupt"},
  };
  for (const auto &[status, text] : expected)
    EXPECT_STREQ(ampc_status_string(status), text) << status;
  EXPECT_EQ(AMPC_OK, 0);
  EXPECT_EQ(AMPC_ERROR_CORRUPT, 9);
  EXPECT_STREQ(ampc_status_string(static_cast<ampc_status>(10)),
               "unknown status");
  EXPECT_STREQ(ampc_status_string(static_cast<ampc_status>(-1)),
               "unknown status");
}

TEST(RuntimeBasics, DtypeNamesAndSizes) {
  struct Expected {
    ampc_dtype dtype;
    int onnxCode;
    const char *name;
    size_t size;
  };
  const Expected expected[] = {
      {AMPC_DTYPE_F32, 1, "f32", 4},  {AMPC_DTYPE_U8, 2, "u8", 1},
      {AMPC_DTYPE_I8, 3, "i8", 1},    {AMPC_DTYPE_I32, 6, "i32", 4},
      {AMPC_DTYPE_I64, 7, "i64", 8},  {AMPC_DTYPE_BOOL, 9, "bool", 1},
      {AMPC_DTYPE_F16, 10, "f16", 2}, {AMPC_DTYPE_F64, 11, "f64", 8},
      {AMPC_DTYPE_BF16, 16, "bf16", 2}, {AMPC_DTYPE_U16, 4, "u16", 2},
      {AMPC_DTYPE_I16, 5, "i16", 2},  {AMPC_DTYPE_U32, 12, "u32", 4},
      {AMPC_DTYPE_U64, 13, "u64", 8},
  };
  for (const Expected &e : expected) {
    EXPECT_EQ(static_cast<int>(e.dtype), e.onnxCode) << e.name;
    EXPECT_STREQ(ampc_dtype_name(e.dtype), e.name);
    EXPECT_EQ(ampc_dtype_size(e.dtype), e.size) << e.name;
  }
  // Codes ONNX has but ampc does not (0 undefined, 8 string, 14 complex64,
  // 17 and up the 8-bit and 4-bit floats).
  for (int code : {0, 8, 14, 15, 17, 99, -1}) {
    EXPECT_EQ(ampc_dtype_size(static_cast<ampc_dtype>(code)), 0u) << code;
    EXPECT_STREQ(ampc_dtype_name(static_cast<ampc_dtype>(code)), "unknown")
        << code;
  }
}

TEST(RuntimeBasics, AbiVersion) {
  EXPECT_EQ(AMPC_ABI_VERSION, 1);
  EXPECT_EQ(ampc_runtime_abi_version(), static_cast<uint32_t>(AMPC_ABI_VERSION));
}

TEST(RuntimeBasics, OptionsInitSetsSizeAndDefaults) {
  ampc_model_options options;
  std::memset(&options, 0xab, sizeof(options));
  ampc_model_options_init(&options);
  EXPECT_EQ(options.struct_size, sizeof(ampc_model_options));
  EXPECT_EQ(options.num_threads, 0);
  EXPECT_EQ(options.cuda_stream, nullptr);
  EXPECT_EQ(options.comm, nullptr);
  ampc_model_options_init(nullptr); // documented no-op
}

TEST(RuntimeBasics, HeadersHaveTheSameLayoutInC99AndCxx) {
  const size_t cxx[] = {
      sizeof(ampc_status),
      sizeof(ampc_dtype),
      sizeof(ampc_model_options),
      offsetof(ampc_model_options, cuda_stream),
      sizeof(ampc_model_info),
      offsetof(ampc_model_info, num_parameters),
      sizeof(ampc_tensor_info),
      offsetof(ampc_tensor_info, shape),
      sizeof(ampc_tensor),
      offsetof(ampc_tensor, size_bytes),
      sizeof(ampc_abi_tensor),
      sizeof(ampc_abi_config),
      sizeof(ampc_model_abi),
      offsetof(ampc_model_abi, state_size),
      offsetof(ampc_model_abi, release),
      offsetof(ampc_model_options, comm),
      sizeof(ampc_comm),
      offsetof(ampc_comm, last_error),
  };
  size_t c[32];
  ASSERT_EQ(runtime_test_c_layout(c), std::size(cxx));
  for (size_t i = 0; i < std::size(cxx); ++i)
    EXPECT_EQ(c[i], cxx[i]) << "layout entry " << i;
}

//===----------------------------------------------------------------------===//
// The shared library itself
//===----------------------------------------------------------------------===//

/// The DT_NEEDED entries and the defined dynamic symbols of an ELF64 file.
struct ElfDynamicInfo {
  std::vector<std::string> needed;
  std::vector<std::string> exported;
};

bool readElfDynamicInfo(const std::string &path, ElfDynamicInfo &info) {
  std::ifstream file(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(file)),
                          std::istreambuf_iterator<char>());
  if (bytes.size() < sizeof(Elf64_Ehdr))
    return false;
  Elf64_Ehdr header;
  std::memcpy(&header, bytes.data(), sizeof(header));
  if (std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0 ||
      header.e_ident[EI_CLASS] != ELFCLASS64 ||
      header.e_shoff + header.e_shnum * sizeof(Elf64_Shdr) > bytes.size())
    return false;
  std::vector<Elf64_Shdr> sections(header.e_shnum);
  std::memcpy(sections.data(), bytes.data() + header.e_shoff,
              sections.size() * sizeof(Elf64_Shdr));
  auto stringAt = [&](const Elf64_Shdr &table, uint64_t offset) {
    return std::string(bytes.data() + table.sh_offset + offset);
  };
  for (const Elf64_Shdr &section : sections) {
    if (section.sh_offset + section.sh_size > bytes.size() ||
        section.sh_link >= sections.size())
      continue;
    const Elf64_Shdr &strings = sections[section.sh_link];
    if (section.sh_type == SHT_DYNAMIC) {
      for (uint64_t at = 0; at + sizeof(Elf64_Dyn) <= section.sh_size;
           at += sizeof(Elf64_Dyn)) {
        Elf64_Dyn entry;
        std::memcpy(&entry, bytes.data() + section.sh_offset + at,
                    sizeof(entry));
        if (entry.d_tag == DT_NEEDED)
          info.needed.push_back(stringAt(strings, entry.d_un.d_val));
      }
    } else if (section.sh_type == SHT_DYNSYM) {
      for (uint64_t at = 0; at + sizeof(Elf64_Sym) <= section.sh_size;
           at += sizeof(Elf64_Sym)) {
        Elf64_Sym symbol;
        std::memcpy(&symbol, bytes.data() + section.sh_offset + at,
                    sizeof(symbol));
        if (symbol.st_shndx != SHN_UNDEF && symbol.st_name != 0 &&
            ELF64_ST_BIND(symbol.st_info) != STB_LOCAL)
          info.exported.push_back(stringAt(strings, symbol.st_name));
      }
    }
  }
  return true;
}

TEST(RuntimeLibrary, DependsOnNoCompilerLibraries) {
  ElfDynamicInfo info;
  ASSERT_TRUE(readElfDynamicInfo(AMPC_RUNTIME_LIBRARY, info))
      << AMPC_RUNTIME_LIBRARY;
  ASSERT_FALSE(info.needed.empty());
  // docs/design.md: only libc/libstdc++ (and what they bring) for the runtime.
  const char *allowed[] = {"libc.so",      "libstdc++.so", "libm.so",
                           "libgcc_s.so",  "libdl.so",     "libpthread.so",
                           "ld-linux"};
  for (const std::string &needed : info.needed) {
    bool ok = false;
    for (const char *prefix : allowed)
      ok = ok || needed.rfind(prefix, 0) == 0;
    EXPECT_TRUE(ok) << "libampc_runtime depends on " << needed;
  }
}

TEST(RuntimeLibrary, ExportsOnlyTheCApi) {
  ElfDynamicInfo info;
  ASSERT_TRUE(readElfDynamicInfo(AMPC_RUNTIME_LIBRARY, info))
      << AMPC_RUNTIME_LIBRARY;
  for (const std::string &symbol : info.exported)
    EXPECT_EQ(symbol.rfind("ampc_", 0), 0u) << "exported: " << symbol;
  for (const char *api :
       {"ampc_model_load", "ampc_model_infer", "ampc_model_release",
        "ampc_last_error", "ampc_model_get_parameter",
        "ampc_model_set_parameter", "ampc_model_num_gradients",
        "ampc_model_gradient_info", "ampc_model_gradients"})
    EXPECT_NE(std::find(info.exported.begin(), info.exported.end(), api),
              info.exported.end())
        << api << " is not exported";
}

//===----------------------------------------------------------------------===//
// ampc_last_error
//===----------------------------------------------------------------------===//

TEST(RuntimeLastError, IsPerThread) {
  std::string inFailingThread, inOtherThread = "not read";
  std::thread failing([&] {
    EXPECT_EQ(ampc_model_load(nullptr, nullptr, nullptr),
              AMPC_ERROR_INVALID_ARGUMENT);
    inFailingThread = ampc_last_error();
  });
  failing.join();
  std::thread other([&] { inOtherThread = ampc_last_error(); });
  other.join();
  EXPECT_EQ(inFailingThread, "ampc_model_load: out_model is NULL");
  EXPECT_EQ(inOtherThread, "");
}

TEST(RuntimeLastError, SuccessLeavesItUnchanged) {
  ampc_model *model = nullptr;
  EXPECT_EQ(ampc_model_load("", nullptr, &model), AMPC_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(ampc_last_error(), "ampc_model_load: path is empty");
  ASSERT_EQ(ampc_model_load(fixturePath("fixture_affine").c_str(), nullptr,
                            &model),
            AMPC_OK);
  EXPECT_STREQ(ampc_last_error(), "ampc_model_load: path is empty");
  ampc_model_release(model);
}

//===----------------------------------------------------------------------===//
// Loading
//===----------------------------------------------------------------------===//

TEST_F(AffineModel, DescribesItself) {
  ampc_model_info info;
  ASSERT_EQ(ampc_model_describe(model, &info), AMPC_OK);
  EXPECT_STREQ(info.name, "affine");
  EXPECT_STREQ(info.target, "cpu");
  EXPECT_STREQ(info.precision, "fp32");
  EXPECT_STREQ(info.mode, "infer");
  EXPECT_EQ(info.num_inputs, 1);
  EXPECT_EQ(info.num_outputs, 2);
  EXPECT_EQ(info.num_parameters, 1);

  ampc_tensor_info tensor;
  ASSERT_EQ(ampc_model_input_info(model, 0, &tensor), AMPC_OK);
  EXPECT_STREQ(tensor.name, "x");
  EXPECT_EQ(tensor.dtype, AMPC_DTYPE_F32);
  ASSERT_EQ(tensor.rank, 2);
  EXPECT_EQ(tensor.shape[0], 2);
  EXPECT_EQ(tensor.shape[1], 3);

  ASSERT_EQ(ampc_model_output_info(model, 0, &tensor), AMPC_OK);
  EXPECT_STREQ(tensor.name, "y");
  EXPECT_EQ(tensor.dtype, AMPC_DTYPE_F32);
  ASSERT_EQ(tensor.rank, 2);
  EXPECT_EQ(tensor.shape[0], 2);
  EXPECT_EQ(tensor.shape[1], 3);

  ASSERT_EQ(ampc_model_output_info(model, 1, &tensor), AMPC_OK);
  EXPECT_STREQ(tensor.name, "s");
  EXPECT_EQ(tensor.dtype, AMPC_DTYPE_F32);
  EXPECT_EQ(tensor.rank, 0);
  EXPECT_EQ(tensor.shape, nullptr);

  ASSERT_EQ(ampc_model_parameter_info(model, 0, &tensor), AMPC_OK);
  EXPECT_STREQ(tensor.name, "scale");
  EXPECT_EQ(tensor.dtype, AMPC_DTYPE_F32);
  ASSERT_EQ(tensor.rank, 1);
  EXPECT_EQ(tensor.shape[0], 1);
}

TEST_F(AffineModel, DescribeRejectsBadArguments) {
  EXPECT_EQ(ampc_model_describe(model, nullptr), AMPC_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(ampc_last_error(), "ampc_model_describe: out is NULL");
  ampc_model_info info;
  EXPECT_EQ(ampc_model_describe(nullptr, &info), AMPC_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(ampc_last_error(), "ampc_model_describe: model is NULL");

  ampc_tensor_info tensor;
  EXPECT_EQ(ampc_model_input_info(model, 0, nullptr),
            AMPC_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(ampc_last_error(), "ampc_model_input_info: out is NULL");
  EXPECT_EQ(ampc_model_input_info(model, 1, &tensor),
            AMPC_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(ampc_last_error(), "ampc_model_input_info: input index 1 is "
                                  "out of range, the model has 1 input");
  EXPECT_EQ(ampc_model_output_info(model, -1, &tensor),
            AMPC_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(ampc_last_error(), "ampc_model_output_info: output index -1 is "
                                  "out of range, the model has 2 outputs");
  EXPECT_EQ(ampc_model_parameter_info(model, 1, &tensor),
            AMPC_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(lastErrorHas("parameter index 1 is out of range"));
  EXPECT_EQ(ampc_model_parameter_info(nullptr, 0, &tensor),
            AMPC_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(ampc_last_error(), "ampc_model_parameter_info: model is NULL");
}

TEST(RuntimeLoad, NullArguments) {
  ampc_model *model = reinterpret_cast<ampc_model *>(0x1);
  EXPECT_EQ(ampc_model_load(fixturePath("fixture_affine").c_str(), nullptr,
                            nullptr),
            AMPC_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(ampc_last_error(), "ampc_model_load: out_model is NULL");
  EXPECT_EQ(ampc_model_load(nullptr, nullptr, &model),
            AMPC_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(ampc_last_error(), "ampc_model_load: path is NULL");
  EXPECT_EQ(model, nullptr) << "a failed load must clear *out_model";
}

TEST(RuntimeLoad, MissingFile) {
  std::string path = fixturePath("no_such_model");
  ampc_model *model = nullptr;
  EXPECT_EQ(ampc_model_load(path.c_str(), nullptr, &model),
            AMPC_ERROR_NOT_FOUND);
  EXPECT_EQ(model, nullptr);
  EXPECT_TRUE(lastErrorHas(("ampc_model_load: cannot open '" + path).c_str()));
  EXPECT_TRUE(lastErrorHas("No such file or directory"));
}

TEST(RuntimeLoad, NotASharedLibrary) {
  std::string path = ::testing::TempDir() + "ampc_runtime_test_not_a_library.so";
  {
    std::ofstream text(path);
    text << "This is a text file that happens to end in .so; the loader "
            "must refuse it without crashing.\n";
  }
  ampc_model *model = nullptr;
  EXPECT_EQ(ampc_model_load(path.c_str(), nullptr, &model),
            AMPC_ERROR_NOT_FOUND);
  EXPECT_EQ(model, nullptr);
  EXPECT_TRUE(lastErrorHas(("cannot open '" + path + "'").c_str()));
  EXPECT_TRUE(lastErrorHas("invalid ELF header"));
  std::remove(path.c_str());
}

TEST(RuntimeLoad, BareFileNameMeansTheCurrentFolder) {
  // dlopen("libc.so.6") would find the system library; ampc_model_load looks
  // in the current folder only.
  ampc_model *model = nullptr;
  EXPECT_EQ(ampc_model_load("libc.so.6", nullptr, &model),
            AMPC_ERROR_NOT_FOUND);
  EXPECT_TRUE(
      lastErrorHas("cannot open 'libc.so.6': No such file or directory"));

  char previous[4096];
  ASSERT_NE(getcwd(previous, sizeof(previous)), nullptr);
  ASSERT_EQ(chdir(AMPC_FIXTURE_DIR), 0);
  ampc_status status = ampc_model_load("fixture_affine.so", nullptr, &model);
  std::string error = ampc_last_error();
  ASSERT_EQ(chdir(previous), 0);
  EXPECT_EQ(status, AMPC_OK) << error;
  EXPECT_NE(model, nullptr);
  ampc_model_release(model);
}

namespace {
/// Copies the file at `from` to `to`: by writing a new file and renaming
/// it over `to` (how a compiler or `cp --remove-destination` replaces a
/// file), or by rewriting `to` in place (how `cp` does).
void copyFile(const std::string &from, const std::string &to, bool inPlace) {
  std::ifstream in(from, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)),
                    std::istreambuf_iterator<char>());
  std::string target = inPlace ? to : to + ".new";
  std::ofstream out(target, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!inPlace)
    ASSERT_EQ(std::rename(target.c_str(), to.c_str()), 0);
}

std::string describedName(ampc_model *model) {
  ampc_model_info info;
  if (ampc_model_describe(model, &info) != AMPC_OK)
    return std::string("describe failed: ") + ampc_last_error();
  return info.name;
}
} // namespace

TEST(RuntimeLoad, ALibraryRebuiltAtTheSamePathLoadsAsTheNewOne) {
  // dlopen hands back the object it already holds for a path (or for the
  // same file): a library rebuilt at the path of one still loaded came back
  // as the old one. Both ways of replacing the file, with the old model
  // live, and the old model still runs after its file was rewritten.
  for (bool inPlace : {false, true}) {
    SCOPED_TRACE(inPlace ? "rewritten in place" : "replaced by rename");
    std::string path = ::testing::TempDir() + "ampc_runtime_test_same.so";
    copyFile(fixturePath("fixture_affine"), path, inPlace);
    ampc_model *old = nullptr;
    ASSERT_EQ(ampc_model_load(path.c_str(), nullptr, &old), AMPC_OK)
        << ampc_last_error();
    EXPECT_EQ(describedName(old), "affine");

    copyFile(fixturePath("fixture_train"), path, inPlace);
    ampc_model *rebuilt = nullptr;
    ASSERT_EQ(ampc_model_load(path.c_str(), nullptr, &rebuilt), AMPC_OK)
        << ampc_last_error();
    EXPECT_EQ(describedName(rebuilt), "fixture_train");
    EXPECT_EQ(describedName(old), "affine");
    float x[6] = {1, 2, 3, 4, 5, 6}, y[6] = {}, sum = 0;
    int64_t shape[2] = {2, 3};
    ampc_tensor input = {AMPC_DTYPE_F32, 2, shape, x, sizeof(x)};
    ampc_tensor outputs[2] = {{AMPC_DTYPE_F32, 2, shape, y, sizeof(y)},
                              {AMPC_DTYPE_F32, 0, nullptr, &sum, sizeof(sum)}};
    EXPECT_EQ(ampc_model_infer(old, &input, 1, outputs, 2), AMPC_OK)
        << ampc_last_error();
    EXPECT_FLOAT_EQ(y[5], 13);
    ampc_model_release(rebuilt);
    ampc_model_release(old);

    // And back: the first library again, after both were released.
    copyFile(fixturePath("fixture_affine"), path, inPlace);
    ASSERT_EQ(ampc_model_load(path.c_str(), nullptr, &old), AMPC_OK);
    EXPECT_EQ(describedName(old), "affine");
    ampc_model_release(old);
    std::remove(path.c_str());
  }
}

TEST(RuntimeLoad, ManyLoadsOfOneFileAreIndependent) {
  // Each load is a copy of its own: the fixture's state is per load, and
  // releasing one leaves the others running.
  std::vector<ampc_model *> models(8, nullptr);
  for (ampc_model *&model : models)
    ASSERT_EQ(ampc_model_load(fixturePath("fixture_affine").c_str(), nullptr,
                              &model),
              AMPC_OK)
        << ampc_last_error();
  for (size_t i = 0; i + 1 < models.size(); ++i)
    ampc_model_release(models[i]);
  EXPECT_EQ(describedName(models.back()), "affine");
  ampc_model_release(models.back());
}

TEST(RuntimeLoad, AFifoIsRefusedWithoutBlocking) {
  // Opening a FIFO for reading waits for a writer: the load blocked
  // forever. Only a regular file is a library.
  std::string path = ::testing::TempDir() + "ampc_runtime_test_fifo.so";
  std::remove(path.c_str());
  ASSERT_EQ(mkfifo(path.c_str(), 0600), 0);
  ampc_model *model = nullptr;
  EXPECT_EQ(ampc_model_load(path.c_str(), nullptr, &model),
            AMPC_ERROR_NOT_FOUND);
  EXPECT_EQ(model, nullptr);
  EXPECT_TRUE(lastErrorHas(
      ("cannot open '" + path + "': not a regular file (a FIFO)").c_str()));
  std::remove(path.c_str());
  EXPECT_EQ(ampc_model_load(::testing::TempDir().c_str(), nullptr, &model),
            AMPC_ERROR_NOT_FOUND);
  EXPECT_TRUE(lastErrorHas("Is a directory"));
}

TEST(RuntimeLoad, NoEntrySymbol) {
  std::string path = fixturePath("fixture_no_entry");
  ampc_model *model = nullptr;
  EXPECT_EQ(ampc_model_load(path.c_str(), nullptr, &model),
            AMPC_ERROR_NOT_FOUND);
  EXPECT_EQ(model, nullptr);
  EXPECT_TRUE(
      lastErrorHas(("'" + path + "' is not an ampc model library").c_str()));
  EXPECT_TRUE(lastErrorHas("undefined symbol: ampc_model_entry"));
}

TEST(RuntimeLoad, AbiMismatchNamesBothVersions) {
  std::string path = fixturePath("fixture_abi_mismatch");
  ampc_model *model = nullptr;
  EXPECT_EQ(ampc_model_load(path.c_str(), nullptr, &model),
            AMPC_ERROR_ABI_MISMATCH);
  EXPECT_EQ(model, nullptr);
  EXPECT_STREQ(ampc_last_error(),
               ("ampc_model_load: '" + path +
                "' was compiled for ABI version 999, this runtime supports "
                "version 1")
                   .c_str());
}

struct BadDescriptorCase {
  const char *variant;
  ampc_status status;
  const char *message;
};

void PrintTo(const BadDescriptorCase &c, std::ostream *os) { *os << c.variant; }

class RuntimeBadDescriptor
    : public ::testing::TestWithParam<BadDescriptorCase> {};

TEST_P(RuntimeBadDescriptor, IsRefusedWithAReason) {
  const BadDescriptorCase &c = GetParam();
  std::string path = fixturePath((std::string("fixture_bad_") + c.variant).c_str());
  ampc_model *model = nullptr;
  EXPECT_EQ(ampc_model_load(path.c_str(), nullptr, &model), c.status)
      << ampc_last_error();
  EXPECT_EQ(model, nullptr);
  EXPECT_TRUE(lastErrorHas(("ampc_model_load: '" + path + "").c_str()));
  EXPECT_TRUE(lastErrorHas(c.message));
}

INSTANTIATE_TEST_SUITE_P(
    Variants, RuntimeBadDescriptor,
    ::testing::Values(
        BadDescriptorCase{"null_descriptor", AMPC_ERROR_CORRUPT,
                          "ampc_model_entry returned NULL"},
        BadDescriptorCase{"small_struct", AMPC_ERROR_CORRUPT,
                          "the descriptor's struct_size is 16, ABI version 1 "
                          "needs at least"},
        BadDescriptorCase{"null_model_name", AMPC_ERROR_CORRUPT,
                          "the descriptor's name is NULL"},
        BadDescriptorCase{"null_mode", AMPC_ERROR_CORRUPT,
                          "the descriptor's mode is NULL"},
        BadDescriptorCase{"unknown_mode", AMPC_ERROR_CORRUPT,
                          "the descriptor's mode is 'predict', expected "
                          "'infer' or 'train'"},
        BadDescriptorCase{"train_mode", AMPC_ERROR_CORRUPT,
                          "mode 'train' but neither a train_step nor a "
                          "gradients function"},
        BadDescriptorCase{"null_infer", AMPC_ERROR_CORRUPT,
                          "the descriptor's infer function "
                          "is NULL"},
        BadDescriptorCase{"negative_count", AMPC_ERROR_CORRUPT,
                          "the descriptor has -1 outputs"},
        BadDescriptorCase{"null_list", AMPC_ERROR_CORRUPT,
                          "the descriptor has 1 input but no input list"},
        BadDescriptorCase{"null_tensor_name", AMPC_ERROR_CORRUPT,
                          "input 0 has a NULL name"},
        BadDescriptorCase{"negative_rank", AMPC_ERROR_CORRUPT,
                          "input 0 ('x') has rank -1"},
        BadDescriptorCase{"null_shape", AMPC_ERROR_CORRUPT,
                          "output 0 ('y') has rank 2 but a NULL shape"},
        BadDescriptorCase{"negative_dim", AMPC_ERROR_CORRUPT,
                          "input 0 ('x') has dimension 1 of size -3"},
        BadDescriptorCase{"unknown_dtype", AMPC_ERROR_CORRUPT,
                          "input 0 ('x') has unknown dtype code 42"},
        BadDescriptorCase{"huge_count", AMPC_ERROR_CORRUPT,
                          "the descriptor has 2147483647 inputs, at most "
                          "1048576"},
        BadDescriptorCase{"huge_rank", AMPC_ERROR_CORRUPT,
                          "input 0 ('x') has rank 100000, at most 16"}),
    [](const ::testing::TestParamInfo<BadDescriptorCase> &info) {
      return std::string(info.param.variant);
    });

TEST(RuntimeLoad, OptionsWithUnknownStructSize) {
  std::string path = fixturePath("fixture_affine");
  ampc_model_options options;
  ampc_model_options_init(&options);
  ampc_model *model = nullptr;

  options.struct_size = 0; // never initialized
  EXPECT_EQ(ampc_model_load(path.c_str(), &options, &model),
            AMPC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(model, nullptr);
  EXPECT_STREQ(ampc_last_error(),
               ("ampc_model_load: options->struct_size is 0, this runtime "
                "knows " +
                std::to_string(sizeof(ampc_model_options)) +
                " (fill options with ampc_model_options_init)")
                   .c_str());

  options.struct_size = sizeof(ampc_model_options) + 8; // a newer header
  EXPECT_EQ(ampc_model_load(path.c_str(), &options, &model),
            AMPC_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(lastErrorHas(
      ("options->struct_size is " + std::to_string(sizeof(options) + 8))
          .c_str()));

  ampc_model_options_init(&options);
  options.num_threads = -2;
  EXPECT_EQ(ampc_model_load(path.c_str(), &options, &model),
            AMPC_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(lastErrorHas("options->num_threads is -2"));
}

TEST(RuntimeLoad, EntryNamesOneModelOfSeveral) {
  std::string path = fixturePath("fixture_affine");
  ampc_model *model = nullptr;
  ASSERT_EQ(ampc_model_load_entry(path.c_str(), "ampc_model_entry_second",
                                  nullptr, &model),
            AMPC_OK)
      << ampc_last_error();
  ampc_model_info info;
  ASSERT_EQ(ampc_model_describe(model, &info), AMPC_OK);
  EXPECT_EQ(info.num_inputs, 1);
  ampc_model_release(model);

  EXPECT_EQ(ampc_model_load_entry(path.c_str(), "ampc_model_entry_missing",
                                  nullptr, &model),
            AMPC_ERROR_NOT_FOUND);
  EXPECT_EQ(model, nullptr);
  EXPECT_TRUE(lastErrorHas("undefined symbol: ampc_model_entry_missing"));

  // NULL is the default entry, as ampc_model_load.
  ASSERT_EQ(ampc_model_load_entry(path.c_str(), nullptr, nullptr, &model),
            AMPC_OK)
      << ampc_last_error();
  ampc_model_release(model);
}

TEST(RuntimeLoad, OptionsReachTheLibrary) {
  int32_t *seenThreads = &fixture_affine_seen_num_threads;
  void **seenStream = &fixture_affine_seen_cuda_stream;

  int hostStream = 0; // stands in for a cudaStream_t
  ampc_model_options options;
  ampc_model_options_init(&options);
  options.num_threads = 3;
  options.cuda_stream = &hostStream;
  ampc_model *model = nullptr;
  ASSERT_EQ(ampc_model_load(fixturePath("fixture_affine").c_str(), &options,
                            &model),
            AMPC_OK)
      << ampc_last_error();
  EXPECT_EQ(*seenThreads, 3);
  EXPECT_EQ(*seenStream, &hostStream);
  ampc_model_release(model);

  ASSERT_EQ(ampc_model_load(fixturePath("fixture_affine").c_str(), nullptr,
                            &model),
            AMPC_OK);
  EXPECT_EQ(*seenThreads, 0) << "NULL options mean the defaults";
  EXPECT_EQ(*seenStream, nullptr);
  ampc_model_release(model);
}

TEST(RuntimeLoad, InitFailureCarriesTheLibraryMessage) {
  int32_t *releases = &fixture_fails_releases;
  *releases = 0;
  std::string path = fixturePath("fixture_init_fails");
  ampc_model *model = nullptr;
  EXPECT_EQ(ampc_model_load(path.c_str(), nullptr, &model),
            AMPC_ERROR_EXECUTION);
  EXPECT_EQ(model, nullptr);
  EXPECT_STREQ(ampc_last_error(),
               ("ampc_model_load: '" + path +
                "': model initialization failed: fixture: init refused")
                   .c_str());
  EXPECT_EQ(*releases, 0) << "release must not follow a failed init";
}

//===----------------------------------------------------------------------===//
// Running
//===----------------------------------------------------------------------===//

TEST_F(AffineModel, InferComputesOutputs) {
  ASSERT_EQ(infer(), AMPC_OK) << ampc_last_error();
  const float expectedY[6] = {3, 5, 7, 9, 11, 13};
  for (int i = 0; i < 6; ++i)
    EXPECT_FLOAT_EQ(y[i], expectedY[i]) << i;
  EXPECT_FLOAT_EQ(sum, 21);

  const float second[6] = {-1.5f, 0, 0.25f, 100, -3, 2};
  std::memcpy(x, second, sizeof(x));
  ASSERT_EQ(infer(), AMPC_OK) << ampc_last_error();
  for (int i = 0; i < 6; ++i)
    EXPECT_FLOAT_EQ(y[i], 2 * second[i] + 1) << i;
  EXPECT_FLOAT_EQ(sum, 97.75f);
}

TEST_F(AffineModel, InferTakesLargerBuffers) {
  float bigger[8] = {};
  outputs[0].data = bigger;
  outputs[0].size_bytes = sizeof(bigger);
  ASSERT_EQ(infer(), AMPC_OK) << ampc_last_error();
  EXPECT_FLOAT_EQ(bigger[5], 13);
  EXPECT_FLOAT_EQ(bigger[6], 0) << "wrote past the tensor";
}

TEST_F(AffineModel, WrongNumberOfTensors) {
  ampc_tensor two[2] = {input, input};
  EXPECT_EQ(ampc_model_infer(model, two, 2, outputs, 2),
            AMPC_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(ampc_last_error(),
               "ampc_model_infer: the model takes 1 input, got 2");
  EXPECT_EQ(ampc_model_infer(model, &input, 0, outputs, 2),
            AMPC_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(ampc_last_error(),
               "ampc_model_infer: the model takes 1 input, got 0");
  EXPECT_EQ(ampc_model_infer(model, &input, 1, outputs, 1),
            AMPC_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(ampc_last_error(),
               "ampc_model_infer: the model gives 2 outputs, got 1");
}

TEST_F(AffineModel, WrongDtype) {
  input.dtype = AMPC_DTYPE_F16;
  EXPECT_EQ(infer(), AMPC_ERROR_DTYPE_MISMATCH);
  EXPECT_STREQ(ampc_last_error(), "ampc_model_infer: input 0 ('x') has dtype "
                                  "f16, the model expects f32");
  input.dtype = static_cast<ampc_dtype>(77);
  EXPECT_EQ(infer(), AMPC_ERROR_DTYPE_MISMATCH);
  EXPECT_TRUE(lastErrorHas("input 0 ('x') has dtype unknown dtype code 77"));
  input.dtype = AMPC_DTYPE_F32;
  outputs[1].dtype = AMPC_DTYPE_F64;
  EXPECT_EQ(infer(), AMPC_ERROR_DTYPE_MISMATCH);
  EXPECT_TRUE(lastErrorHas("output 1 ('s') has dtype f64, the model expects "
                           "f32"));
}

TEST_F(AffineModel, WrongRank) {
  int64_t flat[1] = {6};
  input.rank = 1;
  input.shape = flat;
  EXPECT_EQ(infer(), AMPC_ERROR_SHAPE_MISMATCH);
  EXPECT_STREQ(ampc_last_error(), "ampc_model_infer: input 0 ('x') has rank "
                                  "1, the model expects rank 2 (shape [2, 3])");
  input.rank = 2;
  input.shape = xShape;
  outputs[1].rank = 1;
  outputs[1].shape = flat;
  EXPECT_EQ(infer(), AMPC_ERROR_SHAPE_MISMATCH);
  EXPECT_TRUE(lastErrorHas("output 1 ('s') has rank 1, the model expects "
                           "rank 0 (shape [])"));
}

TEST_F(AffineModel, WrongShape) {
  int64_t wide[2] = {2, 4};
  input.shape = wide;
  EXPECT_EQ(infer(), AMPC_ERROR_SHAPE_MISMATCH);
  EXPECT_STREQ(ampc_last_error(), "ampc_model_infer: input 0 ('x') has shape "
                                  "[2, 4], the model expects [2, 3]");
  int64_t transposed[2] = {3, 2};
  input.shape = xShape;
  outputs[0].shape = transposed;
  EXPECT_EQ(infer(), AMPC_ERROR_SHAPE_MISMATCH);
  EXPECT_TRUE(lastErrorHas("output 0 ('y') has shape [3, 2], the model "
                           "expects [2, 3]"));
}

TEST_F(AffineModel, NullArguments) {
  EXPECT_EQ(ampc_model_infer(nullptr, &input, 1, outputs, 2),
            AMPC_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(ampc_last_error(), "ampc_model_infer: model is NULL");
  EXPECT_EQ(ampc_model_infer(model, nullptr, 1, outputs, 2),
            AMPC_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(ampc_last_error(), "ampc_model_infer: inputs is NULL");
  EXPECT_EQ(ampc_model_infer(model, &input, 1, nullptr, 2),
            AMPC_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(ampc_last_error(), "ampc_model_infer: outputs is NULL");

  input.shape = nullptr;
  EXPECT_EQ(infer(), AMPC_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(ampc_last_error(),
               "ampc_model_infer: input 0 ('x') has rank 2 but a NULL shape");
  input.shape = xShape;

  input.data = nullptr;
  EXPECT_EQ(infer(), AMPC_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(ampc_last_error(),
               "ampc_model_infer: input 0 ('x') has NULL data");
  input.data = x;
  outputs[1].data = nullptr;
  EXPECT_EQ(infer(), AMPC_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(ampc_last_error(),
               "ampc_model_infer: output 1 ('s') has NULL data");
}

TEST_F(AffineModel, BufferTooSmall) {
  input.size_bytes = 20;
  EXPECT_EQ(infer(), AMPC_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(ampc_last_error(), "ampc_model_infer: input 0 ('x') has "
                                  "size_bytes 20, f32 [2, 3] needs 24");
  input.size_bytes = sizeof(x);
  outputs[1].size_bytes = 2;
  EXPECT_EQ(infer(), AMPC_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(ampc_last_error(), "ampc_model_infer: output 1 ('s') has "
                                  "size_bytes 2, f32 [] needs 4");
}

TEST_F(AffineModel, OverlappingBuffers) {
  outputs[0].data = x; // in place
  EXPECT_EQ(infer(), AMPC_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(ampc_last_error(),
               "ampc_model_infer: output 0 ('y') overlaps input 0 ('x') in "
               "memory");
  outputs[0].data = y;
  outputs[1].data = &y[5];
  EXPECT_EQ(infer(), AMPC_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(ampc_last_error(),
               "ampc_model_infer: output 1 ('s') overlaps output 0 ('y') in "
               "memory");
  outputs[1].data = &sum;
  EXPECT_EQ(infer(), AMPC_OK) << "adjacent buffers do not overlap";
}

TEST(RuntimeInfer, ExecutionFailureCarriesTheLibraryMessage) {
  float a[4] = {}, b[4] = {};
  int64_t shape[1] = {4};
  ampc_tensor input = {AMPC_DTYPE_F32, 1, shape, a, sizeof(a)};
  ampc_tensor output = {AMPC_DTYPE_F32, 1, shape, b, sizeof(b)};

  ampc_model *model = nullptr;
  ASSERT_EQ(ampc_model_load(fixturePath("fixture_fails").c_str(), nullptr,
                            &model),
            AMPC_OK)
      << ampc_last_error();
  EXPECT_EQ(ampc_model_infer(model, &input, 1, &output, 1),
            AMPC_ERROR_EXECUTION);
  EXPECT_STREQ(ampc_last_error(), "ampc_model_infer: model 'fails' failed: "
                                  "fixture: deliberate failure");
  ampc_model_release(model);

  ASSERT_EQ(ampc_model_load(fixturePath("fixture_fails_silently").c_str(),
                            nullptr, &model),
            AMPC_OK)
      << ampc_last_error();
  EXPECT_EQ(ampc_model_infer(model, &input, 1, &output, 1),
            AMPC_ERROR_EXECUTION);
  EXPECT_STREQ(ampc_last_error(),
               "ampc_model_infer: model 'fails' failed: error code 7");
  ampc_model_release(model);
}

//===----------------------------------------------------------------------===//
// Handles
//===----------------------------------------------------------------------===//

constexpr const char *kNotLive =
    "model handle is not live (released or never created)";

TEST(RuntimeHandles, ReleaseNullIsANoOp) {
  ampc_model *model = nullptr;
  EXPECT_EQ(ampc_model_load("", nullptr, &model), AMPC_ERROR_INVALID_ARGUMENT);
  ampc_model_release(nullptr);
  EXPECT_STREQ(ampc_last_error(), "ampc_model_load: path is empty")
      << "release(NULL) must not report an error";
}

TEST(RuntimeHandles, ReleaseTwiceIsReportedNotACrash) {
  int32_t *releases = &fixture_affine_releases;
  int32_t before = *releases;

  ampc_model *model = nullptr;
  ASSERT_EQ(ampc_model_load(fixturePath("fixture_affine").c_str(), nullptr,
                            &model),
            AMPC_OK);
  ampc_model_release(model);
  EXPECT_EQ(*releases, before + 1) << "the library's release runs once";
  ampc_model_release(model);
  EXPECT_EQ(std::string(ampc_last_error()),
            std::string("ampc_model_release: ") + kNotLive);
  EXPECT_EQ(*releases, before + 1);
}

TEST(RuntimeHandles, CallsAfterReleaseAreRefused) {
  ampc_model *model = nullptr;
  ASSERT_EQ(ampc_model_load(fixturePath("fixture_affine").c_str(), nullptr,
                            &model),
            AMPC_OK);
  ampc_model_release(model);

  float x[6] = {}, y[6] = {}, sum = 0;
  int64_t shape[2] = {2, 3};
  ampc_tensor input = {AMPC_DTYPE_F32, 2, shape, x, sizeof(x)};
  ampc_tensor outputs[2] = {{AMPC_DTYPE_F32, 2, shape, y, sizeof(y)},
                            {AMPC_DTYPE_F32, 0, nullptr, &sum, sizeof(sum)}};
  EXPECT_EQ(ampc_model_infer(model, &input, 1, outputs, 2),
            AMPC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(std::string(ampc_last_error()),
            std::string("ampc_model_infer: ") + kNotLive);

  ampc_model_info info;
  EXPECT_EQ(ampc_model_describe(model, &info), AMPC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(std::string(ampc_last_error()),
            std::string("ampc_model_describe: ") + kNotLive);
  ampc_tensor_info tensor;
  EXPECT_EQ(ampc_model_output_info(model, 0, &tensor),
            AMPC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(std::string(ampc_last_error()),
            std::string("ampc_model_output_info: ") + kNotLive);
}

TEST(RuntimeHandles, NeverCreatedHandleIsRefused) {
  int notAModel = 0;
  ampc_model *bogus = reinterpret_cast<ampc_model *>(&notAModel);
  ampc_model_info info;
  EXPECT_EQ(ampc_model_describe(bogus, &info), AMPC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(std::string(ampc_last_error()),
            std::string("ampc_model_describe: ") + kNotLive);
  ampc_model_release(bogus);
  EXPECT_EQ(std::string(ampc_last_error()),
            std::string("ampc_model_release: ") + kNotLive);
  EXPECT_EQ(notAModel, 0);
}

TEST(RuntimeHandles, ReleasedHandlesAreNeverReused) {
  std::string path = fixturePath("fixture_affine");
  ampc_model *first = nullptr, *second = nullptr;
  ASSERT_EQ(ampc_model_load(path.c_str(), nullptr, &first), AMPC_OK);
  ampc_model_release(first);
  ASSERT_EQ(ampc_model_load(path.c_str(), nullptr, &second), AMPC_OK);
  EXPECT_NE(first, second);
  ampc_model_info info;
  EXPECT_EQ(ampc_model_describe(first, &info), AMPC_ERROR_INVALID_ARGUMENT)
      << "a stale handle must not reach the newer model";
  EXPECT_TRUE(lastErrorHas(kNotLive));
  EXPECT_EQ(ampc_model_describe(second, &info), AMPC_OK);
  ampc_model_release(second);
}

TEST(RuntimeHandles, TwoHandlesOfOneLibraryAreIndependent) {
  std::string path = fixturePath("fixture_affine");
  ampc_model *first = nullptr, *second = nullptr;
  ASSERT_EQ(ampc_model_load(path.c_str(), nullptr, &first), AMPC_OK);
  ASSERT_EQ(ampc_model_load(path.c_str(), nullptr, &second), AMPC_OK);
  ASSERT_NE(first, second);
  ampc_model_release(first);

  // The library stays loaded for the second handle.
  float x[6] = {1, 1, 1, 1, 1, 1}, y[6] = {}, sum = 0;
  int64_t shape[2] = {2, 3};
  ampc_tensor input = {AMPC_DTYPE_F32, 2, shape, x, sizeof(x)};
  ampc_tensor outputs[2] = {{AMPC_DTYPE_F32, 2, shape, y, sizeof(y)},
                            {AMPC_DTYPE_F32, 0, nullptr, &sum, sizeof(sum)}};
  ASSERT_EQ(ampc_model_infer(second, &input, 1, outputs, 2), AMPC_OK)
      << ampc_last_error();
  EXPECT_FLOAT_EQ(y[0], 3);
  EXPECT_FLOAT_EQ(sum, 6);
  ampc_model_release(second);
}

TEST_F(AffineModel, ConcurrentInferOnOneHandleIsSerialized) {
  // The fixture fails a call that starts while another runs on its state.
  constexpr int kThreads = 8, kCalls = 200;
  std::atomic<int> failures{0};
  std::string firstError;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      int64_t shape[2] = {2, 3};
      float in[6], out[6], total;
      for (int i = 0; i < 6; ++i)
        in[i] = static_cast<float>(t + i);
      ampc_tensor input = {AMPC_DTYPE_F32, 2, shape, in, sizeof(in)};
      ampc_tensor outs[2] = {{AMPC_DTYPE_F32, 2, shape, out, sizeof(out)},
                             {AMPC_DTYPE_F32, 0, nullptr, &total,
                              sizeof(total)}};
      for (int call = 0; call < kCalls; ++call) {
        bool ok = ampc_model_infer(model, &input, 1, outs, 2) == AMPC_OK &&
                  out[5] == 2 * in[5] + 1 && total == 6 * t + 15;
        if (!ok && failures++ == 0)
          firstError = ampc_last_error();
      }
    });
  for (std::thread &thread : threads)
    thread.join();
  EXPECT_EQ(failures.load(), 0) << firstError;
}

//===----------------------------------------------------------------------===//
// Parameters and gradients
//===----------------------------------------------------------------------===//

/// A loaded fixture_gradients (x f64 [3]; parameters steps i64 [] and
/// w f64 [3]; loss = 0.5 * sum((w * x)^2), d loss / d w = w * x^2) and tensors
/// that match it.
class GradientsModel : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_EQ(ampc_model_load(fixturePath("fixture_gradients").c_str(),
                              nullptr, &model),
              AMPC_OK)
        << ampc_last_error();
    input = {AMPC_DTYPE_F64, 1, vectorShape, x, sizeof(x)};
    lossTensor = {AMPC_DTYPE_F64, 0, nullptr, &loss, sizeof(loss)};
    gradient = {AMPC_DTYPE_F64, 1, vectorShape, dw, sizeof(dw)};
    wTensor = {AMPC_DTYPE_F64, 1, vectorShape, w, sizeof(w)};
    stepsTensor = {AMPC_DTYPE_I64, 0, nullptr, &steps, sizeof(steps)};
  }
  void TearDown() override { ampc_model_release(model); }

  ampc_status gradients() {
    return ampc_model_gradients(model, &input, 1, &lossTensor, &gradient, 1);
  }
  /// The loss infer gives (output 0).
  double inferLoss() {
    double out = 0, wx[3];
    ampc_tensor outputs[2] = {{AMPC_DTYPE_F64, 0, nullptr, &out, sizeof(out)},
                              {AMPC_DTYPE_F64, 1, vectorShape, wx,
                               sizeof(wx)}};
    EXPECT_EQ(ampc_model_infer(model, &input, 1, outputs, 2), AMPC_OK)
        << ampc_last_error();
    return out;
  }

  ampc_model *model = nullptr;
  int64_t vectorShape[1] = {3};
  double x[3] = {1, -2, 0.5};
  double loss = 0, dw[3] = {}, w[3] = {};
  int64_t steps = 0;
  ampc_tensor input, lossTensor, gradient, wTensor, stepsTensor;
};

TEST_F(GradientsModel, DescribesItsGradients) {
  int32_t count = -1, parameter = -1;
  ASSERT_EQ(ampc_model_num_gradients(model, &count), AMPC_OK)
      << ampc_last_error();
  EXPECT_EQ(count, 1);
  ASSERT_EQ(ampc_model_gradient_info(model, 0, &parameter), AMPC_OK)
      << ampc_last_error();
  EXPECT_EQ(parameter, 1) << "the gradient is w's, not the frozen steps'";
  ampc_tensor_info info;
  ASSERT_EQ(ampc_model_parameter_info(model, parameter, &info), AMPC_OK);
  EXPECT_STREQ(info.name, "w");
}

TEST_F(GradientsModel, GetParameterReadsTheCurrentValues) {
  ASSERT_EQ(ampc_model_get_parameter(model, 1, &wTensor), AMPC_OK)
      << ampc_last_error();
  EXPECT_EQ(w[0], 1);
  EXPECT_EQ(w[1], 2);
  EXPECT_EQ(w[2], 3);
  ASSERT_EQ(ampc_model_get_parameter(model, 0, &stepsTensor), AMPC_OK)
      << ampc_last_error();
  EXPECT_EQ(steps, 7);
}

TEST_F(GradientsModel, SetParameterChangesWhatRunsAndIsReadBack) {
  const double newW[3] = {0.5, -1, 4};
  ampc_tensor in = {AMPC_DTYPE_F64, 1, vectorShape,
                    const_cast<double *>(newW), sizeof(newW)};
  ASSERT_EQ(ampc_model_set_parameter(model, 1, &in), AMPC_OK)
      << ampc_last_error();
  ASSERT_EQ(ampc_model_get_parameter(model, 1, &wTensor), AMPC_OK);
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(w[i], newW[i]) << i;
  // 0.5 * ((0.5 * 1)^2 + (-1 * -2)^2 + (4 * 0.5)^2)
  EXPECT_DOUBLE_EQ(inferLoss(), 0.5 * (0.25 + 4 + 4));

  int64_t newSteps = -3;
  ampc_tensor stepsIn = {AMPC_DTYPE_I64, 0, nullptr, &newSteps,
                         sizeof(newSteps)};
  ASSERT_EQ(ampc_model_set_parameter(model, 0, &stepsIn), AMPC_OK)
      << ampc_last_error();
  ASSERT_EQ(ampc_model_get_parameter(model, 0, &stepsTensor), AMPC_OK);
  EXPECT_EQ(steps, -3);
}

TEST_F(GradientsModel, GradientsGiveTheLossAndLeaveParametersAlone) {
  ASSERT_EQ(gradients(), AMPC_OK) << ampc_last_error();
  // 0.5 * ((1 * 1)^2 + (2 * -2)^2 + (3 * 0.5)^2); w * x^2.
  EXPECT_DOUBLE_EQ(loss, 9.625);
  EXPECT_DOUBLE_EQ(dw[0], 1);
  EXPECT_DOUBLE_EQ(dw[1], 8);
  EXPECT_DOUBLE_EQ(dw[2], 0.75);
  EXPECT_DOUBLE_EQ(inferLoss(), 9.625) << "infer's output 0 is the loss";
  ASSERT_EQ(ampc_model_get_parameter(model, 1, &wTensor), AMPC_OK);
  EXPECT_EQ(w[0], 1);
  EXPECT_EQ(w[1], 2);
  EXPECT_EQ(w[2], 3);

  // After a parameter changes, the gradient follows it.
  const double newW[3] = {-1, 0, 2};
  ampc_tensor in = {AMPC_DTYPE_F64, 1, vectorShape,
                    const_cast<double *>(newW), sizeof(newW)};
  ASSERT_EQ(ampc_model_set_parameter(model, 1, &in), AMPC_OK);
  ASSERT_EQ(gradients(), AMPC_OK) << ampc_last_error();
  EXPECT_DOUBLE_EQ(loss, 0.5 * (1 + 0 + 1));
  EXPECT_DOUBLE_EQ(dw[0], -1);
  EXPECT_DOUBLE_EQ(dw[1], 0);
  EXPECT_DOUBLE_EQ(dw[2], 0.5);
}

TEST_F(GradientsModel, GradientsTakeLargerBuffers) {
  double bigger[5] = {0, 0, 0, 0, -9};
  gradient.data = bigger;
  gradient.size_bytes = sizeof(bigger);
  ASSERT_EQ(gradients(), AMPC_OK) << ampc_last_error();
  EXPECT_DOUBLE_EQ(bigger[1], 8);
  EXPECT_EQ(bigger[3], 0) << "wrote past the gradient";
  EXPECT_EQ(bigger[4], -9);
}

TEST_F(GradientsModel, TwoHandlesHaveTheirOwnParameters) {
  ampc_model *other = nullptr;
  ASSERT_EQ(ampc_model_load(fixturePath("fixture_gradients").c_str(), nullptr,
                            &other),
            AMPC_OK);
  const double newW[3] = {9, 9, 9};
  ampc_tensor in = {AMPC_DTYPE_F64, 1, vectorShape,
                    const_cast<double *>(newW), sizeof(newW)};
  ASSERT_EQ(ampc_model_set_parameter(other, 1, &in), AMPC_OK);
  ASSERT_EQ(ampc_model_get_parameter(model, 1, &wTensor), AMPC_OK);
  EXPECT_EQ(w[0], 1) << "setting one handle's parameter changed another's";
  ampc_model_release(other);
}

TEST_F(GradientsModel, ParameterCallsRejectBadArguments) {
  EXPECT_EQ(ampc_model_get_parameter(nullptr, 1, &wTensor),
            AMPC_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(ampc_last_error(), "ampc_model_get_parameter: model is NULL");
  EXPECT_EQ(ampc_model_set_parameter(nullptr, 1, &wTensor),
            AMPC_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(ampc_last_error(), "ampc_model_set_parameter: model is NULL");
  EXPECT_EQ(ampc_model_get_parameter(model, 1, nullptr),
            AMPC_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(ampc_last_error(), "ampc_model_get_parameter: out is NULL");
  EXPECT_EQ(ampc_model_set_parameter(model, 1, nullptr),
            AMPC_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(ampc_last_error(), "ampc_model_set_parameter: in is NULL");

  EXPECT_EQ(ampc_model_get_parameter(model, 2, &wTensor),
            AMPC_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(ampc_last_error(), "ampc_model_get_parameter: parameter index "
                                  "2 is out of range, the model has 2 "
                                  "parameters");
  EXPECT_EQ(ampc_model_set_parameter(model, -1, &wTensor),
            AMPC_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(ampc_last_error(), "ampc_model_set_parameter: parameter index "
                                  "-1 is out of range, the model has 2 "
                                  "parameters");

  // The right tensor for the wrong parameter.
  EXPECT_EQ(ampc_model_get_parameter(model, 0, &wTensor),
            AMPC_ERROR_DTYPE_MISMATCH);
  EXPECT_STREQ(ampc_last_error(), "ampc_model_get_parameter: parameter 0 "
                                  "('steps') has dtype f64, the model expects "
                                  "i64");
  stepsTensor.dtype = AMPC_DTYPE_F64;
  stepsTensor.size_bytes = 8;
  stepsTensor.rank = 0;
  ampc_tensor scalarW = stepsTensor;
  EXPECT_EQ(ampc_model_set_parameter(model, 1, &scalarW),
            AMPC_ERROR_SHAPE_MISMATCH);
  EXPECT_STREQ(ampc_last_error(), "ampc_model_set_parameter: parameter 1 "
                                  "('w') has rank 0, the model expects rank 1 "
                                  "(shape [3])");

  wTensor.dtype = AMPC_DTYPE_F32;
  EXPECT_EQ(ampc_model_set_parameter(model, 1, &wTensor),
            AMPC_ERROR_DTYPE_MISMATCH);
  EXPECT_STREQ(ampc_last_error(), "ampc_model_set_parameter: parameter 1 "
                                  "('w') has dtype f32, the model expects f64");
  wTensor.dtype = AMPC_DTYPE_F64;

  int64_t four[1] = {4};
  wTensor.shape = four;
  EXPECT_EQ(ampc_model_get_parameter(model, 1, &wTensor),
            AMPC_ERROR_SHAPE_MISMATCH);
  EXPECT_STREQ(ampc_last_error(), "ampc_model_get_parameter: parameter 1 "
                                  "('w') has shape [4], the model expects [3]");
  wTensor.shape = nullptr;
  EXPECT_EQ(ampc_model_get_parameter(model, 1, &wTensor),
            AMPC_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(ampc_last_error(), "ampc_model_get_parameter: parameter 1 "
                                  "('w') has rank 1 but a NULL shape");
  wTensor.shape = vectorShape;

  wTensor.data = nullptr;
  EXPECT_EQ(ampc_model_set_parameter(model, 1, &wTensor),
            AMPC_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(ampc_last_error(),
               "ampc_model_set_parameter: parameter 1 ('w') has NULL data");
  wTensor.data = w;
  wTensor.size_bytes = 16;
  EXPECT_EQ(ampc_model_get_parameter(model, 1, &wTensor),
            AMPC_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(ampc_last_error(), "ampc_model_get_parameter: parameter 1 "
                                  "('w') has size_bytes 16, f64 [3] needs 24");

  // Nothing was written by the refused calls.
  wTensor.size_bytes = sizeof(w);
  ASSERT_EQ(ampc_model_get_parameter(model, 1, &wTensor), AMPC_OK);
  EXPECT_EQ(w[0], 1);
  EXPECT_EQ(w[2], 3);
}

TEST_F(GradientsModel, GradientInfoRejectsBadArguments) {
  int32_t value = 0;
  EXPECT_EQ(ampc_model_num_gradients(nullptr, &value),
            AMPC_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(ampc_last_error(), "ampc_model_num_gradients: model is NULL");
  EXPECT_EQ(ampc_model_num_gradients(model, nullptr),
            AMPC_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(ampc_last_error(), "ampc_model_num_gradients: out is NULL");
  EXPECT_EQ(ampc_model_gradient_info(nullptr, 0, &value),
            AMPC_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(ampc_last_error(), "ampc_model_gradient_info: model is NULL");
  EXPECT_EQ(ampc_model_gradient_info(model, 0, nullptr),
            AMPC_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(ampc_last_error(),
               "ampc_model_gradient_info: out_parameter_index is NULL");
  value = 42;
  EXPECT_EQ(ampc_model_gradient_info(model, 1, &value),
            AMPC_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(ampc_last_error(), "ampc_model_gradient_info: gradient index 1 "
                                  "is out of range, the model has 1 gradient");
  EXPECT_EQ(ampc_model_gradient_info(model, -1, &value),
            AMPC_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(lastErrorHas("gradient index -1 is out of range"));
  EXPECT_EQ(value, 42) << "a failed call must not write its out-parameter";
}

TEST_F(GradientsModel, GradientsRejectWrongCountsAndNullPointers) {
  ampc_tensor two[2] = {input, input};
  EXPECT_EQ(ampc_model_gradients(model, two, 2, &lossTensor, &gradient, 1),
            AMPC_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(ampc_last_error(),
               "ampc_model_gradients: the model takes 1 input, got 2");
  ampc_tensor gradientPair[2] = {gradient, gradient};
  EXPECT_EQ(ampc_model_gradients(model, &input, 1, &lossTensor, gradientPair,
                                 2),
            AMPC_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(ampc_last_error(),
               "ampc_model_gradients: the model has 1 gradient, got 2");
  EXPECT_EQ(ampc_model_gradients(model, &input, 1, &lossTensor, &gradient, 0),
            AMPC_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(ampc_last_error(),
               "ampc_model_gradients: the model has 1 gradient, got 0");

  EXPECT_EQ(ampc_model_gradients(nullptr, &input, 1, &lossTensor, &gradient, 1),
            AMPC_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(ampc_last_error(), "ampc_model_gradients: model is NULL");
  EXPECT_EQ(ampc_model_gradients(model, nullptr, 1, &lossTensor, &gradient, 1),
            AMPC_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(ampc_last_error(), "ampc_model_gradients: inputs is NULL");
  EXPECT_EQ(ampc_model_gradients(model, &input, 1, nullptr, &gradient, 1),
            AMPC_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(ampc_last_error(), "ampc_model_gradients: loss is NULL");
  EXPECT_EQ(ampc_model_gradients(model, &input, 1, &lossTensor, nullptr, 1),
            AMPC_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(ampc_last_error(), "ampc_model_gradients: gradients is NULL");

  input.data = nullptr;
  EXPECT_EQ(gradients(), AMPC_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(ampc_last_error(),
               "ampc_model_gradients: input 0 ('x') has NULL data");
  input.data = x;
  lossTensor.data = nullptr;
  EXPECT_EQ(gradients(), AMPC_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(ampc_last_error(),
               "ampc_model_gradients: loss (output 0 'loss') has NULL data");
  lossTensor.data = &loss;
  gradient.data = nullptr;
  EXPECT_EQ(gradients(), AMPC_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(ampc_last_error(), "ampc_model_gradients: gradient 0 (of "
                                  "parameter 1 'w') has NULL data");
}

TEST_F(GradientsModel, GradientsRejectWrongTensors) {
  input.dtype = AMPC_DTYPE_F32;
  EXPECT_EQ(gradients(), AMPC_ERROR_DTYPE_MISMATCH);
  EXPECT_STREQ(ampc_last_error(), "ampc_model_gradients: input 0 ('x') has "
                                  "dtype f32, the model expects f64");
  input.dtype = AMPC_DTYPE_F64;

  lossTensor.dtype = AMPC_DTYPE_F32;
  EXPECT_EQ(gradients(), AMPC_ERROR_DTYPE_MISMATCH);
  EXPECT_STREQ(ampc_last_error(), "ampc_model_gradients: loss (output 0 "
                                  "'loss') has dtype f32, the model expects "
                                  "f64");
  lossTensor.dtype = AMPC_DTYPE_F64;
  int64_t one[1] = {1};
  lossTensor.rank = 1;
  lossTensor.shape = one;
  EXPECT_EQ(gradients(), AMPC_ERROR_SHAPE_MISMATCH);
  EXPECT_STREQ(ampc_last_error(), "ampc_model_gradients: loss (output 0 "
                                  "'loss') has rank 1, the model expects rank "
                                  "0 (shape [])");
  lossTensor.rank = 0;
  lossTensor.size_bytes = 4;
  EXPECT_EQ(gradients(), AMPC_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(ampc_last_error(), "ampc_model_gradients: loss (output 0 "
                                  "'loss') has size_bytes 4, f64 [] needs 8");
  lossTensor.size_bytes = sizeof(loss);

  gradient.dtype = AMPC_DTYPE_I64;
  EXPECT_EQ(gradients(), AMPC_ERROR_DTYPE_MISMATCH);
  EXPECT_STREQ(ampc_last_error(), "ampc_model_gradients: gradient 0 (of "
                                  "parameter 1 'w') has dtype i64, the model "
                                  "expects f64");
  gradient.dtype = AMPC_DTYPE_F64;
  int64_t two[1] = {2};
  gradient.shape = two;
  EXPECT_EQ(gradients(), AMPC_ERROR_SHAPE_MISMATCH);
  EXPECT_STREQ(ampc_last_error(), "ampc_model_gradients: gradient 0 (of "
                                  "parameter 1 'w') has shape [2], the model "
                                  "expects [3]");
  gradient.shape = vectorShape;
  gradient.size_bytes = 23;
  EXPECT_EQ(gradients(), AMPC_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(lastErrorHas("gradient 0 (of parameter 1 'w') has size_bytes "
                           "23, f64 [3] needs 24"));
  gradient.size_bytes = sizeof(dw);
  EXPECT_EQ(gradients(), AMPC_OK) << ampc_last_error();
}

TEST_F(GradientsModel, GradientsRejectOverlappingBuffers) {
  gradient.data = x; // in place over the input
  EXPECT_EQ(gradients(), AMPC_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(ampc_last_error(), "ampc_model_gradients: gradient 0 (of "
                                  "parameter 1 'w') overlaps input 0 ('x') in "
                                  "memory");
  gradient.data = dw;
  lossTensor.data = &dw[2];
  EXPECT_EQ(gradients(), AMPC_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(ampc_last_error(), "ampc_model_gradients: gradient 0 (of "
                                  "parameter 1 'w') overlaps loss (output 0 "
                                  "'loss') in memory");
  lossTensor.data = &x[1];
  EXPECT_EQ(gradients(), AMPC_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(ampc_last_error(), "ampc_model_gradients: loss (output 0 "
                                  "'loss') overlaps input 0 ('x') in memory");
  double adjacent[4];
  gradient.data = adjacent;
  lossTensor.data = &adjacent[3];
  EXPECT_EQ(gradients(), AMPC_OK) << "adjacent buffers do not overlap";
  EXPECT_DOUBLE_EQ(adjacent[3], 9.625);
}

TEST(RuntimeGradients, InferenceLibraryIsUnsupported) {
  ampc_model *model = nullptr;
  ASSERT_EQ(ampc_model_load(fixturePath("fixture_affine").c_str(), nullptr,
                            &model),
            AMPC_OK);
  float scale[1] = {0};
  int64_t shape[1] = {1};
  ampc_tensor parameter = {AMPC_DTYPE_F32, 1, shape, scale, sizeof(scale)};
  EXPECT_EQ(ampc_model_get_parameter(model, 0, &parameter),
            AMPC_ERROR_UNSUPPORTED);
  EXPECT_STREQ(ampc_last_error(),
               "ampc_model_get_parameter: model 'affine' has no "
               "read_parameter function: its library was compiled for "
               "inference; compile it with --mode=train");
  EXPECT_EQ(ampc_model_set_parameter(model, 0, &parameter),
            AMPC_ERROR_UNSUPPORTED);
  EXPECT_TRUE(lastErrorHas("ampc_model_set_parameter: model 'affine' has no "
                           "write_parameter function"));
  int32_t count = -1;
  EXPECT_EQ(ampc_model_num_gradients(model, &count), AMPC_ERROR_UNSUPPORTED);
  EXPECT_STREQ(ampc_last_error(),
               "ampc_model_num_gradients: model 'affine' has no gradients: "
               "its library was compiled for inference; compile it with "
               "--mode=train");
  EXPECT_EQ(count, -1);
  EXPECT_EQ(ampc_model_gradient_info(model, 0, &count),
            AMPC_ERROR_UNSUPPORTED);
  EXPECT_TRUE(lastErrorHas("ampc_model_gradient_info: model 'affine' has no "
                           "gradients"));

  float x[6] = {}, loss = 0;
  int64_t xShape[2] = {2, 3};
  ampc_tensor input = {AMPC_DTYPE_F32, 2, xShape, x, sizeof(x)};
  ampc_tensor lossTensor = {AMPC_DTYPE_F32, 0, nullptr, &loss, sizeof(loss)};
  EXPECT_EQ(ampc_model_gradients(model, &input, 1, &lossTensor, nullptr, 0),
            AMPC_ERROR_UNSUPPORTED);
  EXPECT_STREQ(ampc_last_error(),
               "ampc_model_gradients: model 'affine' has no gradients: its "
               "library was compiled for inference; compile it with "
               "--mode=train");
  ampc_model_release(model);
}

TEST(RuntimeGradients, AppendedFieldsBeyondStructSizeAreNotRead) {
  // The library has every function, but its struct_size says version 1.
  ampc_model *model = nullptr;
  ASSERT_EQ(ampc_model_load(fixturePath("fixture_gradients_version1").c_str(),
                            nullptr, &model),
            AMPC_OK)
      << ampc_last_error();
  double w[3];
  int64_t shape[1] = {3};
  ampc_tensor parameter = {AMPC_DTYPE_F64, 1, shape, w, sizeof(w)};
  EXPECT_EQ(ampc_model_get_parameter(model, 1, &parameter),
            AMPC_ERROR_UNSUPPORTED);
  EXPECT_EQ(ampc_model_set_parameter(model, 1, &parameter),
            AMPC_ERROR_UNSUPPORTED);
  int32_t count = -1;
  EXPECT_EQ(ampc_model_num_gradients(model, &count), AMPC_ERROR_UNSUPPORTED);
  ampc_model_release(model);
}

TEST(RuntimeGradients, LibraryFailuresCarryItsMessage) {
  int32_t *fail = &fixture_gradients_fail;
  ampc_model *model = nullptr;
  ASSERT_EQ(ampc_model_load(fixturePath("fixture_gradients").c_str(), nullptr,
                            &model),
            AMPC_OK);
  double x[3] = {}, w[3] = {}, dw[3], loss;
  int64_t shape[1] = {3};
  ampc_tensor vector = {AMPC_DTYPE_F64, 1, shape, w, sizeof(w)};
  ampc_tensor input = {AMPC_DTYPE_F64, 1, shape, x, sizeof(x)};
  ampc_tensor gradient = {AMPC_DTYPE_F64, 1, shape, dw, sizeof(dw)};
  ampc_tensor lossTensor = {AMPC_DTYPE_F64, 0, nullptr, &loss, sizeof(loss)};

  *fail = 1;
  EXPECT_EQ(ampc_model_get_parameter(model, 1, &vector), AMPC_ERROR_EXECUTION);
  EXPECT_STREQ(ampc_last_error(),
               "ampc_model_get_parameter: model 'gradients' failed to read "
               "parameter 1 ('w'): fixture: read_parameter refused");
  EXPECT_EQ(ampc_model_set_parameter(model, 1, &vector), AMPC_ERROR_EXECUTION);
  EXPECT_STREQ(ampc_last_error(),
               "ampc_model_set_parameter: model 'gradients' failed to write "
               "parameter 1 ('w'): fixture: write_parameter refused");
  EXPECT_EQ(ampc_model_gradients(model, &input, 1, &lossTensor, &gradient, 1),
            AMPC_ERROR_EXECUTION);
  EXPECT_STREQ(ampc_last_error(), "ampc_model_gradients: model 'gradients' "
                                  "failed: fixture: gradients refused");
  *fail = 0;
  EXPECT_EQ(ampc_model_gradients(model, &input, 1, &lossTensor, &gradient, 1),
            AMPC_OK)
      << ampc_last_error();
  ampc_model_release(model);
}

TEST(RuntimeGradients, CallsAfterReleaseAreRefused) {
  ampc_model *model = nullptr;
  ASSERT_EQ(ampc_model_load(fixturePath("fixture_gradients").c_str(), nullptr,
                            &model),
            AMPC_OK);
  ampc_model_release(model);
  const std::string notLive = kNotLive;

  double x[3] = {}, w[3] = {}, dw[3], loss;
  int64_t shape[1] = {3};
  ampc_tensor vector = {AMPC_DTYPE_F64, 1, shape, w, sizeof(w)};
  ampc_tensor input = {AMPC_DTYPE_F64, 1, shape, x, sizeof(x)};
  ampc_tensor gradient = {AMPC_DTYPE_F64, 1, shape, dw, sizeof(dw)};
  ampc_tensor lossTensor = {AMPC_DTYPE_F64, 0, nullptr, &loss, sizeof(loss)};
  int32_t value = 0;
  EXPECT_EQ(ampc_model_get_parameter(model, 1, &vector),
            AMPC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(ampc_last_error(), "ampc_model_get_parameter: " + notLive);
  EXPECT_EQ(ampc_model_set_parameter(model, 1, &vector),
            AMPC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(ampc_last_error(), "ampc_model_set_parameter: " + notLive);
  EXPECT_EQ(ampc_model_num_gradients(model, &value),
            AMPC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(ampc_last_error(), "ampc_model_num_gradients: " + notLive);
  EXPECT_EQ(ampc_model_gradient_info(model, 0, &value),
            AMPC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(ampc_last_error(), "ampc_model_gradient_info: " + notLive);
  EXPECT_EQ(ampc_model_gradients(model, &input, 1, &lossTensor, &gradient, 1),
            AMPC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(ampc_last_error(), "ampc_model_gradients: " + notLive);
}

class RuntimeBadGradientDescriptor
    : public ::testing::TestWithParam<BadDescriptorCase> {};

TEST_P(RuntimeBadGradientDescriptor, IsRefusedWithAReason) {
  const BadDescriptorCase &c = GetParam();
  std::string path = fixturePath(
      (std::string("fixture_gradients_bad_") + c.variant).c_str());
  ampc_model *model = nullptr;
  EXPECT_EQ(ampc_model_load(path.c_str(), nullptr, &model), c.status)
      << ampc_last_error();
  EXPECT_EQ(model, nullptr);
  EXPECT_TRUE(lastErrorHas(("ampc_model_load: '" + path + "': ").c_str()));
  EXPECT_TRUE(lastErrorHas(c.message));
}

INSTANTIATE_TEST_SUITE_P(
    Variants, RuntimeBadGradientDescriptor,
    ::testing::Values(
        BadDescriptorCase{"negative_gradients", AMPC_ERROR_CORRUPT,
                          "the descriptor has -1 gradients"},
        BadDescriptorCase{"null_gradient_list", AMPC_ERROR_CORRUPT,
                          "the descriptor has 1 gradient but no "
                          "gradient_parameters list"},
        BadDescriptorCase{"gradient_index", AMPC_ERROR_CORRUPT,
                          "gradient 0 belongs to parameter 2, the descriptor "
                          "has 2 parameters"},
        BadDescriptorCase{"integer_gradient", AMPC_ERROR_CORRUPT,
                          "gradient 0 belongs to parameter 0 ('steps'), which "
                          "is i64, not a floating-point type"},
        BadDescriptorCase{"duplicate_gradient", AMPC_ERROR_CORRUPT,
                          "gradients 0 and 1 both belong to parameter 1 "
                          "('w')"},
        BadDescriptorCase{"no_write_parameter", AMPC_ERROR_CORRUPT,
                          "the descriptor has a gradients function but no "
                          "write_parameter function for its 2 parameters"},
        BadDescriptorCase{"no_loss_output", AMPC_ERROR_CORRUPT,
                          "the descriptor has a gradients function but no "
                          "output 0 to give the loss's dtype and shape"}),
    [](const ::testing::TestParamInfo<BadDescriptorCase> &info) {
      return std::string(info.param.variant);
    });

} // namespace

//===----------------------------------------------------------------------===//
// Training calls: misuse gets a status and a message, never a crash
//===----------------------------------------------------------------------===//

namespace {
/// The training fixture, loaded; released at the end of the test.
struct TrainFixture {
  ampc_model *model = nullptr;
  TrainFixture() {
    EXPECT_EQ(ampc_model_load(fixturePath("fixture_train").c_str(), nullptr,
                              &model),
              AMPC_OK)
        << ampc_last_error();
  }
  ~TrainFixture() { ampc_model_release(model); }
};

/// Reads input `i`'s shape from the model and allocates zeros for it.
struct InputBuffers {
  std::vector<std::vector<unsigned char>> data;
  std::vector<ampc_tensor> tensors;
  explicit InputBuffers(ampc_model *model) {
    ampc_model_info info;
    EXPECT_EQ(ampc_model_describe(model, &info), AMPC_OK);
    data.resize(static_cast<size_t>(info.num_inputs));
    for (int32_t i = 0; i < info.num_inputs; ++i) {
      ampc_tensor_info t;
      EXPECT_EQ(ampc_model_input_info(model, i, &t), AMPC_OK);
      size_t count = 1;
      for (int32_t d = 0; d < t.rank; ++d)
        count *= static_cast<size_t>(t.shape[d]);
      data[i].assign(count * ampc_dtype_size(t.dtype), 0);
      tensors.push_back({t.dtype, t.rank, t.shape, data[i].data(),
                         data[i].size()});
    }
  }
};
} // namespace

TEST(RuntimeTraining, InferenceLibraryAnswersUnsupported) {
  ampc_model *model = nullptr;
  ASSERT_EQ(ampc_model_load(fixturePath("fixture_affine").c_str(), nullptr,
                            &model),
            AMPC_OK);
  float lr = 0;
  EXPECT_EQ(ampc_model_get_learning_rate(model, &lr), AMPC_ERROR_UNSUPPORTED);
  EXPECT_TRUE(lastErrorHas("ampc_model_get_learning_rate: model"));
  EXPECT_TRUE(lastErrorHas("has no training step"));
  EXPECT_EQ(ampc_model_save_checkpoint(model, "x.ckpt"),
            AMPC_ERROR_UNSUPPORTED);
  ampc_scaler_state state;
  EXPECT_EQ(ampc_model_get_scaler_state(model, &state),
            AMPC_ERROR_UNSUPPORTED);
  ampc_model_release(model);
}

TEST(RuntimeTraining, NullAndBadArgumentsAreRefused) {
  TrainFixture f;
  ASSERT_NE(f.model, nullptr);
  EXPECT_EQ(ampc_model_get_learning_rate(f.model, nullptr),
            AMPC_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(lastErrorHas("ampc_model_get_learning_rate: out is NULL"));
  EXPECT_EQ(ampc_model_set_learning_rate(f.model, -1.0f),
            AMPC_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(lastErrorHas("the learning rate must be finite and >= 0"));
  EXPECT_EQ(ampc_model_set_learning_rate(f.model, NAN),
            AMPC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(ampc_model_get_scaler_state(f.model, nullptr),
            AMPC_ERROR_INVALID_ARGUMENT);
  ampc_scaler_state bad{0.0f, 0, 0, 0};
  EXPECT_EQ(ampc_model_set_scaler_state(f.model, &bad),
            AMPC_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(lastErrorHas("expected a finite scale > 0"));
  EXPECT_EQ(ampc_model_save_checkpoint(f.model, nullptr),
            AMPC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(ampc_model_load_checkpoint(f.model, ""),
            AMPC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(ampc_model_training_info(f.model, nullptr),
            AMPC_ERROR_INVALID_ARGUMENT);

  InputBuffers in(f.model);
  float loss = 0;
  ampc_tensor lossTensor{AMPC_DTYPE_F32, 0, nullptr, &loss, sizeof loss};
  EXPECT_EQ(ampc_model_train_step(f.model, in.tensors.data(), 1, &lossTensor),
            AMPC_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(lastErrorHas("ampc_model_train_step: the model takes 2 inputs, "
                           "got 1"));
  EXPECT_EQ(ampc_model_train_step(f.model, in.tensors.data(), 2, nullptr),
            AMPC_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(lastErrorHas("loss is NULL"));
  ampc_tensor wrong = in.tensors[0];
  wrong.dtype = AMPC_DTYPE_F64;
  ampc_tensor inputs[2] = {wrong, in.tensors[1]};
  EXPECT_EQ(ampc_model_train_step(f.model, inputs, 2, &lossTensor),
            AMPC_ERROR_DTYPE_MISMATCH);
  EXPECT_EQ(ampc_model_train_step(f.model, in.tensors.data(), 2, &lossTensor),
            AMPC_OK)
      << ampc_last_error();
}

TEST(RuntimeTraining, StateRoundTripsAndReleasedHandlesAreRefused) {
  ampc_model *stale = nullptr;
  {
    TrainFixture f;
    ASSERT_NE(f.model, nullptr);
    ASSERT_EQ(ampc_model_set_learning_rate(f.model, 0.25f), AMPC_OK);
    float lr = 0;
    ASSERT_EQ(ampc_model_get_learning_rate(f.model, &lr), AMPC_OK);
    EXPECT_EQ(lr, 0.25f);
    ampc_scaler_state in{1024.0f, 3, 7, 2}, out{};
    ASSERT_EQ(ampc_model_set_scaler_state(f.model, &in), AMPC_OK)
        << ampc_last_error();
    ASSERT_EQ(ampc_model_get_scaler_state(f.model, &out), AMPC_OK);
    EXPECT_EQ(out.scale, 1024.0f);
    EXPECT_EQ(out.growth_tracker, 3);
    EXPECT_EQ(out.steps, 7);
    EXPECT_EQ(out.skipped_steps, 2);
    ampc_training_info info;
    ASSERT_EQ(ampc_model_training_info(f.model, &info), AMPC_OK);
    EXPECT_EQ(info.num_labels, 1);
    // A CPU model finishes every call before returning: nothing to wait for.
    EXPECT_EQ(ampc_model_synchronize(f.model), AMPC_OK);
    stale = f.model;
  }
  float lr = 0;
  EXPECT_EQ(ampc_model_get_learning_rate(stale, &lr),
            AMPC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(ampc_model_train_step(stale, nullptr, 0, nullptr),
            AMPC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(ampc_model_synchronize(stale), AMPC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(ampc_model_synchronize(nullptr), AMPC_ERROR_INVALID_ARGUMENT);
}

// A library with an optimizer runs train_step and has no gradients entry:
// the message says so, not that it was compiled for inference.
// Buffers (issue 34): state the step updates that is neither trained nor
// the optimizer's, such as BatchNorm's statistics and batch counters.
TEST(RuntimeBuffers, DescribedReadWrittenAndUpdatedByTheStep) {
  ampc_model *model = nullptr;
  ASSERT_EQ(ampc_model_load(fixturePath("fixture_train_buffer").c_str(),
                            nullptr, &model),
            AMPC_OK)
      << ampc_last_error();
  int32_t count = -1;
  ASSERT_EQ(ampc_model_num_buffers(model, &count), AMPC_OK);
  EXPECT_EQ(count, 1);
  ampc_tensor_info info;
  ASSERT_EQ(ampc_model_buffer_info(model, 0, &info), AMPC_OK);
  EXPECT_STREQ(info.name, "batches");
  EXPECT_EQ(info.dtype, AMPC_DTYPE_I64);
  EXPECT_EQ(info.rank, 0);

  int64_t value = -1;
  ampc_tensor tensor{AMPC_DTYPE_I64, 0, nullptr, &value, sizeof value};
  ASSERT_EQ(ampc_model_get_buffer(model, 0, &tensor), AMPC_OK);
  EXPECT_EQ(value, 0);
  value = 41;
  ASSERT_EQ(ampc_model_set_buffer(model, 0, &tensor), AMPC_OK);
  InputBuffers in(model);
  float loss = 0;
  ampc_tensor lossTensor{AMPC_DTYPE_F32, 0, nullptr, &loss, sizeof loss};
  ASSERT_EQ(ampc_model_train_step(model, in.tensors.data(), 2, &lossTensor),
            AMPC_OK)
      << ampc_last_error();
  value = 0;
  ASSERT_EQ(ampc_model_get_buffer(model, 0, &tensor), AMPC_OK);
  EXPECT_EQ(value, 42);

  // Misuse is an error status with the call's name, never a crash.
  EXPECT_EQ(ampc_model_num_buffers(model, nullptr),
            AMPC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(ampc_model_buffer_info(model, 1, &info),
            AMPC_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(lastErrorHas("ampc_model_buffer_info: buffer index 1 is out of "
                           "range, the model has 1 buffer"))
      << ampc_last_error();
  EXPECT_EQ(ampc_model_get_buffer(model, -1, &tensor),
            AMPC_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(lastErrorHas("ampc_model_get_buffer: buffer index -1 is out of "
                           "range"))
      << ampc_last_error();
  EXPECT_EQ(ampc_model_set_buffer(model, 0, nullptr),
            AMPC_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(lastErrorHas("ampc_model_set_buffer: in is NULL"));
  float wrong = 0;
  ampc_tensor wrongDtype{AMPC_DTYPE_F32, 0, nullptr, &wrong, sizeof wrong};
  EXPECT_EQ(ampc_model_set_buffer(model, 0, &wrongDtype),
            AMPC_ERROR_DTYPE_MISMATCH);
  EXPECT_TRUE(lastErrorHas("buffer 0 ('batches') has dtype f32, the model "
                           "expects i64"))
      << ampc_last_error();
  ampc_model_release(model);
  EXPECT_EQ(ampc_model_num_buffers(model, &count),
            AMPC_ERROR_INVALID_ARGUMENT);
}

TEST(RuntimeBuffers, NoneWithoutThemAndAMalformedListIsRefused) {
  TrainFixture f;
  ASSERT_NE(f.model, nullptr);
  int32_t count = -1;
  ASSERT_EQ(ampc_model_num_buffers(f.model, &count), AMPC_OK);
  EXPECT_EQ(count, 0);
  int64_t value = 0;
  ampc_tensor tensor{AMPC_DTYPE_I64, 0, nullptr, &value, sizeof value};
  EXPECT_EQ(ampc_model_get_buffer(f.model, 0, &tensor),
            AMPC_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(lastErrorHas("the model has 0 buffers")) << ampc_last_error();

  ampc_model *model = nullptr;
  EXPECT_EQ(ampc_model_load(fixturePath("fixture_train_bad_buffer").c_str(),
                            nullptr, &model),
            AMPC_ERROR_CORRUPT);
  EXPECT_EQ(model, nullptr);
  EXPECT_TRUE(lastErrorHas("buffer 0 is state tensor 0, which is a "
                           "parameter, out of range or another buffer"))
      << ampc_last_error();
}

TEST(RuntimeTraining, GradientsOfAnOptimizerLibraryNameTheOptimizer) {
  TrainFixture f;
  ASSERT_NE(f.model, nullptr);
  int32_t count = -1;
  EXPECT_EQ(ampc_model_num_gradients(f.model, &count), AMPC_ERROR_UNSUPPORTED);
  EXPECT_TRUE(lastErrorHas("has no gradients: its library was compiled with "
                           "an optimizer"))
      << ampc_last_error();
  EXPECT_TRUE(lastErrorHas("compile it with --optimizer=none for gradients"))
      << ampc_last_error();
  EXPECT_FALSE(lastErrorHas("inference")) << ampc_last_error();
}

// Data parallel (issue 41): a library without all-reduces runs alone (rank
// 0 of 1, nothing sent); a null handle is refused.
TEST_F(GradientsModel, DataParallelAloneAndNullHandle) {
  int32_t rank = -1, size = -1;
  uint64_t bytes = 7;
  ASSERT_EQ(ampc_model_data_parallel(model, &rank, &size, &bytes), AMPC_OK);
  EXPECT_EQ(rank, 0);
  EXPECT_EQ(size, 1);
  EXPECT_EQ(bytes, 0u);
  EXPECT_EQ(ampc_model_data_parallel(model, nullptr, nullptr, nullptr),
            AMPC_OK);
  EXPECT_EQ(ampc_model_data_parallel(nullptr, &rank, &size, &bytes),
            AMPC_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(ampc_last_error(), "ampc_model_data_parallel: model is NULL");
}

// OpenBLAS's kernel set for the CPU (lib/Runtime/BlasCore.h): the newest
// one the features allow, none below AVX2 (OpenBLAS's own choice stands).
TEST(RuntimeBlasCore, TheNewestKernelSetTheFeaturesAllow) {
  ampc::CpuFeatures none;
  EXPECT_STREQ(ampc::openBlasCoreFor(none), "");
  ampc::CpuFeatures avx2 = none;
  avx2.avx2 = true;
  EXPECT_STREQ(ampc::openBlasCoreFor(avx2), "") << "AVX2 without FMA";
  avx2.fma = true;
  EXPECT_STREQ(ampc::openBlasCoreFor(avx2), "Haswell");
  ampc::CpuFeatures avx512 = avx2;
  avx512.avx512 = true;
  EXPECT_STREQ(ampc::openBlasCoreFor(avx512), "SkylakeX");
  avx512.avx512bf16 = true;
  EXPECT_STREQ(ampc::openBlasCoreFor(avx512), "Cooperlake");
}

// This binary links OpenBLAS, so its kernels are chosen: the scope leaves
// the environment alone, as it does when the user set the variable.
TEST(RuntimeBlasCore, LeavesTheEnvironmentWhenOpenBlasIsLoadedOrSet) {
  ASSERT_EQ(unsetenv("OPENBLAS_CORETYPE"), 0);
  {
    ampc::ScopedBlasCore scope;
    EXPECT_EQ(std::getenv("OPENBLAS_CORETYPE"), nullptr);
  }
  ASSERT_EQ(setenv("OPENBLAS_CORETYPE", "Haswell", 1), 0);
  {
    ampc::ScopedBlasCore scope;
    EXPECT_STREQ(std::getenv("OPENBLAS_CORETYPE"), "Haswell");
  }
  EXPECT_STREQ(std::getenv("OPENBLAS_CORETYPE"), "Haswell");
  ASSERT_EQ(unsetenv("OPENBLAS_CORETYPE"), 0);
}
