/* embed.c - run a compiled ampc model from C through ampc.h.
 *
 *   embed MODEL.so INPUT.npy [INPUT.npy ...]
 *
 * Loads the library with libampc_runtime, prints what it describes, reads
 * one .npy file per input (C order; float32, float64, int64, int32 or bool,
 * matching the input's dtype), runs inference and prints every output, one
 * value per line. Exit status 0 on success, 1 with a message otherwise. */
#include "ampc/Runtime/ampc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(const char *what, const char *detail) {
  fprintf(stderr, "embed: %s: %s\n", what, detail);
  return 1;
}

/* The dtype a .npy descr names, or 0 when embed does not read it. */
static ampc_dtype npyDtype(const char *descr) {
  if (!strcmp(descr, "<f4")) return AMPC_DTYPE_F32;
  if (!strcmp(descr, "<f8")) return AMPC_DTYPE_F64;
  if (!strcmp(descr, "<i8")) return AMPC_DTYPE_I64;
  if (!strcmp(descr, "<i4")) return AMPC_DTYPE_I32;
  if (!strcmp(descr, "<i2")) return AMPC_DTYPE_I16;
  if (!strcmp(descr, "<u8")) return AMPC_DTYPE_U64;
  if (!strcmp(descr, "<u4")) return AMPC_DTYPE_U32;
  if (!strcmp(descr, "<u2")) return AMPC_DTYPE_U16;
  if (!strcmp(descr, "|i1")) return AMPC_DTYPE_I8;
  if (!strcmp(descr, "|u1")) return AMPC_DTYPE_U8;
  if (!strcmp(descr, "|b1")) return AMPC_DTYPE_BOOL;
  return (ampc_dtype)0;
}

/* Reads a version 1 or 2 .npy file into *data (malloc'd). */
static int readNpy(const char *path, ampc_dtype *dtype, int32_t *rank,
                   int64_t shape[8], void **data, size_t *bytes) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return fail(path, "cannot open");
  unsigned char magic[10];
  if (fread(magic, 1, 8, f) != 8 || memcmp(magic, "\x93NUMPY", 6)) {
    fclose(f);
    return fail(path, "not a .npy file");
  }
  size_t headerLength = 0;
  if (magic[6] == 1) {
    if (fread(magic, 1, 2, f) != 2) { fclose(f); return fail(path, "truncated"); }
    headerLength = magic[0] | (magic[1] << 8);
  } else {
    if (fread(magic, 1, 4, f) != 4) { fclose(f); return fail(path, "truncated"); }
    headerLength = magic[0] | (magic[1] << 8) | ((size_t)magic[2] << 16) |
                   ((size_t)magic[3] << 24);
  }
  char *header = calloc(headerLength + 1, 1);
  if (!header || fread(header, 1, headerLength, f) != headerLength) {
    free(header);
    fclose(f);
    return fail(path, "truncated header");
  }
  char descr[16] = {0};
  const char *d = strstr(header, "'descr': '");
  const char *order = strstr(header, "'fortran_order': False");
  const char *s = strstr(header, "'shape': (");
  if (!d || !order || !s || sscanf(d + 10, "%15[^']", descr) != 1) {
    free(header);
    fclose(f);
    return fail(path, "unsupported header (C order with descr and shape needed)");
  }
  *dtype = npyDtype(descr);
  *rank = 0;
  size_t count = 1;
  for (s += 10; *s && *s != ')';) {
    char *end;
    long long dim = strtoll(s, &end, 10);
    if (end == s) { ++s; continue; }
    if (*rank == 8) { free(header); fclose(f); return fail(path, "more than 8 dimensions"); }
    shape[(*rank)++] = dim;
    count *= (size_t)dim;
    s = end;
  }
  free(header);
  if (!*dtype) {
    fclose(f);
    return fail(path, "unsupported dtype (float32, float64, int64, int32, bool)");
  }
  *bytes = count * ampc_dtype_size(*dtype);
  *data = malloc(*bytes ? *bytes : 1);
  if (!*data || fread(*data, 1, *bytes, f) != *bytes) {
    fclose(f);
    return fail(path, "truncated data");
  }
  fclose(f);
  return 0;
}

static void printValue(ampc_dtype dtype, const void *data, size_t i) {
  switch (dtype) {
  case AMPC_DTYPE_F32: printf("%.9g\n", ((const float *)data)[i]); break;
  case AMPC_DTYPE_F64: printf("%.17g\n", ((const double *)data)[i]); break;
  case AMPC_DTYPE_I64: printf("%lld\n", (long long)((const int64_t *)data)[i]); break;
  case AMPC_DTYPE_I32: printf("%d\n", ((const int32_t *)data)[i]); break;
  case AMPC_DTYPE_U64: printf("%llu\n", (unsigned long long)((const uint64_t *)data)[i]); break;
  case AMPC_DTYPE_U32: printf("%u\n", (unsigned)((const uint32_t *)data)[i]); break;
  case AMPC_DTYPE_I16: printf("%d\n", ((const int16_t *)data)[i]); break;
  case AMPC_DTYPE_U16: printf("%u\n", (unsigned)((const uint16_t *)data)[i]); break;
  case AMPC_DTYPE_I8: printf("%d\n", ((const int8_t *)data)[i]); break;
  case AMPC_DTYPE_U8:
  case AMPC_DTYPE_BOOL: printf("%d\n", ((const uint8_t *)data)[i]); break;
  default: printf("(%s value)\n", ampc_dtype_name(dtype)); break;
  }
}

int main(int argc, char **argv) {
  if (argc < 2 || !strcmp(argv[1], "--help")) {
    fprintf(argc < 2 ? stderr : stdout,
            "usage: embed MODEL.so INPUT.npy [INPUT.npy ...]\n");
    return argc < 2 ? 1 : 0;
  }
  ampc_model *model = NULL;
  if (ampc_model_load(argv[1], NULL, &model) != AMPC_OK)
    return fail(argv[1], ampc_last_error());
  ampc_model_info info;
  ampc_model_describe(model, &info);
  printf("model %s (target %s, precision %s, mode %s): %d input(s), %d output(s), %d parameter(s)\n",
         info.name, info.target, info.precision, info.mode, info.num_inputs,
         info.num_outputs, info.num_parameters);
  if (argc - 2 != info.num_inputs) {
    ampc_model_release(model);
    fprintf(stderr, "embed: %s takes %d input(s), %d .npy file(s) given\n",
            argv[1], info.num_inputs, argc - 2);
    return 1;
  }
  int status = 0;
  ampc_tensor *inputs = calloc((size_t)info.num_inputs + 1, sizeof(ampc_tensor));
  ampc_tensor *outputs = calloc((size_t)info.num_outputs + 1, sizeof(ampc_tensor));
  int64_t (*inShapes)[8] = calloc((size_t)info.num_inputs + 1, sizeof *inShapes);
  for (int32_t i = 0; i < info.num_inputs && !status; ++i) {
    status = readNpy(argv[2 + i], &inputs[i].dtype, &inputs[i].rank,
                     inShapes[i], &inputs[i].data, &inputs[i].size_bytes);
    inputs[i].shape = inShapes[i];
  }
  for (int32_t i = 0; i < info.num_outputs && !status; ++i) {
    ampc_tensor_info out;
    ampc_model_output_info(model, i, &out);
    size_t count = 1;
    for (int32_t d = 0; d < out.rank; ++d)
      count *= (size_t)out.shape[d];
    outputs[i].dtype = out.dtype;
    outputs[i].rank = out.rank;
    outputs[i].shape = out.shape;
    outputs[i].size_bytes = count * ampc_dtype_size(out.dtype);
    outputs[i].data = malloc(outputs[i].size_bytes ? outputs[i].size_bytes : 1);
  }
  if (!status &&
      ampc_model_infer(model, inputs, info.num_inputs, outputs,
                       info.num_outputs) != AMPC_OK)
    status = fail(argv[1], ampc_last_error());
  for (int32_t i = 0; i < info.num_outputs && !status; ++i) {
    ampc_tensor_info out;
    ampc_model_output_info(model, i, &out);
    printf("output %s (%s, shape [", out.name, ampc_dtype_name(out.dtype));
    for (int32_t d = 0; d < out.rank; ++d)
      printf("%s%lld", d ? ", " : "", (long long)out.shape[d]);
    printf("]):\n");
    size_t count = outputs[i].size_bytes / ampc_dtype_size(out.dtype);
    for (size_t k = 0; k < count; ++k)
      printValue(out.dtype, outputs[i].data, k);
  }
  for (int32_t i = 0; i < info.num_inputs; ++i)
    free(inputs[i].data);
  for (int32_t i = 0; i < info.num_outputs; ++i)
    free(outputs[i].data);
  free(inputs);
  free(outputs);
  free(inShapes);
  ampc_model_release(model);
  return status;
}
