// The dtypes Python tensordict stores that only some LibTorch versions have. See
// NOTE [ Dtypes by LibTorch version ].
//
// NOTE [ Dtypes by LibTorch version ]
// torch.uint16 / uint32 / uint64 (LibTorch 2.3) and the float8 dtypes (e5m2 and e4m3fn 2.1,
// e5m2fnuz and e4m3fnuz 2.2, e8m0fnu 2.7) are absent from LibTorch 1.13. Every reader and writer
// (memmap directories and .tdz archives, consolidated files, Zarr stores, HDF5 files, shared
// memory handles, td::distributed's wire) asks NewerDtype for a name it does not know, so a file
// naming one of them is refused on 1.13 with the same words (NoSuchDtypeMessage), and read on 2.x.
// Where they are written follows Python tensordict 0.14: uint16/32/64 in every format; float8 in
// memmap directories only (its consolidate(filename=), to_zarr and to_h5 raise on float8, so ours
// are a TypeError naming the key). //td/io:newer_dtypes_test checks every format both ways.
// Each dtype is detected from the headers where it has its own (c10/util/Float8_*.h); the wide
// unsigned ones share their header with older dtypes, so they go by the version number.
#pragma once

#include <c10/core/ScalarType.h>
#include <c10/util/StringUtil.h>
#include <torch/csrc/api/include/torch/version.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace td::compat {

// One dtype of NOTE [ Dtypes by LibTorch version ].
struct NewerDtypeInfo {
  std::string_view name;             // as Python prints it: "torch.uint16"
  int code;                          // its c10::ScalarType value where it exists
  std::string_view since;            // the first LibTorch that has it: "2.3"
  std::optional<c10::ScalarType> type;  // nullopt where this LibTorch lacks it
  bool is_float8;
};

#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 3)
#define TD_COMPAT_UINT_(t) std::optional<c10::ScalarType>(c10::ScalarType::t)
#else
#define TD_COMPAT_UINT_(t) std::optional<c10::ScalarType>()
#endif
#if __has_include(<c10/util/Float8_e4m3fn.h>)
#define TD_COMPAT_F8_(t) std::optional<c10::ScalarType>(c10::ScalarType::t)
#else
#define TD_COMPAT_F8_(t) std::optional<c10::ScalarType>()
#endif
#if __has_include(<c10/util/Float8_e4m3fnuz.h>)
#define TD_COMPAT_F8_FNUZ_(t) std::optional<c10::ScalarType>(c10::ScalarType::t)
#else
#define TD_COMPAT_F8_FNUZ_(t) std::optional<c10::ScalarType>()
#endif
#if __has_include(<c10/util/Float8_e8m0fnu.h>)
#define TD_COMPAT_F8_E8M0_(t) std::optional<c10::ScalarType>(c10::ScalarType::t)
#else
#define TD_COMPAT_F8_E8M0_(t) std::optional<c10::ScalarType>()
#endif

// Every dtype of NOTE [ Dtypes by LibTorch version ], in ScalarType order.
inline const NewerDtypeInfo kNewerDtypes[] = {
    {"torch.float8_e5m2", 23, "2.1", TD_COMPAT_F8_(Float8_e5m2), true},
    {"torch.float8_e4m3fn", 24, "2.1", TD_COMPAT_F8_(Float8_e4m3fn), true},
    {"torch.float8_e5m2fnuz", 25, "2.2", TD_COMPAT_F8_FNUZ_(Float8_e5m2fnuz), true},
    {"torch.float8_e4m3fnuz", 26, "2.2", TD_COMPAT_F8_FNUZ_(Float8_e4m3fnuz), true},
    {"torch.uint16", 27, "2.3", TD_COMPAT_UINT_(UInt16), false},
    {"torch.uint32", 28, "2.3", TD_COMPAT_UINT_(UInt32), false},
    {"torch.uint64", 29, "2.3", TD_COMPAT_UINT_(UInt64), false},
    {"torch.float8_e8m0fnu", 44, "2.7", TD_COMPAT_F8_E8M0_(Float8_e8m0fnu), true},
};

#undef TD_COMPAT_UINT_
#undef TD_COMPAT_F8_
#undef TD_COMPAT_F8_FNUZ_
#undef TD_COMPAT_F8_E8M0_

// The entry of `name` ("torch.uint16") in kNewerDtypes, whether or not this LibTorch has it;
// nullptr for any other name.
inline const NewerDtypeInfo* FindNewerDtype(std::string_view name) {
  for (const NewerDtypeInfo& d : kNewerDtypes) {
    if (d.name == name) return &d;
  }
  return nullptr;
}
// The entry of the ScalarType value `code` (td::distributed's wire), or nullptr.
inline const NewerDtypeInfo* FindNewerDtypeCode(int64_t code) {
  for (const NewerDtypeInfo& d : kNewerDtypes) {
    if (d.code == code) return &d;
  }
  return nullptr;
}
// The entry of `type`, or nullptr (older dtypes, and the ones Python tensordict does not store).
inline const NewerDtypeInfo* FindNewerDtype(c10::ScalarType type) {
  for (const NewerDtypeInfo& d : kNewerDtypes) {
    if (d.type == type) return &d;
  }
  return nullptr;
}

// The dtype `name` names when it is one of kNewerDtypes and this LibTorch has it; nullopt
// otherwise (FindNewerDtype tells a dtype this LibTorch lacks from a name no LibTorch has).
inline std::optional<c10::ScalarType> NewerDtype(std::string_view name) {
  const NewerDtypeInfo* d = FindNewerDtype(name);
  return d ? d->type : std::nullopt;
}

// "this LibTorch (1.13.1) has no dtype torch.uint16 (LibTorch 2.3 and later have it)": the
// words every format uses when it refuses a dtype of kNewerDtypes that this LibTorch lacks.
inline std::string NoSuchDtypeMessage(const NewerDtypeInfo& d) {
  return c10::str("this LibTorch (", TORCH_VERSION, ") has no dtype ", d.name, " (LibTorch ",
                  d.since, " and later have it)");
}

}  // namespace td::compat
