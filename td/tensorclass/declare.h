// The per-field machinery of TD_TENSORCLASS (td/tensorclass/tensorclass.h, whose file comment
// documents it; included from there): the macros it applies to each field, the name checks of
// its static_asserts, the tags td_for_each_field passes and the post_init hook's caller.
//
// NOTE [ Frozen classes ]
// A class declaring `static constexpr bool kFrozen = true;` (upstream's frozen=True) has every
// object locked (TensorDict::lock_) from construction on: the constructors lock after
// post_init, and from_tensordict, wrap (every operation's result, nested class fields read
// back, Class::unset) lock what they wrap. On a locked object of such a class the setters,
// set(name, v), del_(name) and update(other) throw LockedError naming the class and the fields
// (even for a tensor of the same shape, which a merely locked TensorDict writes in place; as
// upstream, whose locked TensorDict refuses set and update unless in place), and unlock_()
// throws LockedError; what is written in place still works (in-place tensor ops, set_,
// update_, update with UpdateOptions::inplace, index_put_ of existing entries, as upstream's
// frozen dataclass lets tensors be changed in place). A frozen class cannot be filled lazily
// (unset + index_put_ would add keys). The lock cannot be taken off behind the class's back:
// each object holds a locked owner TensorDict above its TensorDict (FrozenOwner), so
// tensordict() and its copies refuse unlock_() (NOTE [ Locks span levels ] in
// td/core/structure.cc) and a parent's unlock_() leaves it locked, while the object lives; a
// locked TensorDict refuses to replace non-tensor data, and a nested class read from a frozen
// object (a field, or a field of one) refuses its setters, set, del_ and update as the frozen
// object does. to_tensordict() is an unlocked copy (every level copied, tensors shared) whose
// changes do not reach the object, as upstream's to_tensordict().
//
// NOTE [ Shadowing fields ]
// By default a field may not be named like a TensorClass operation or property (kMemberNames
// below: index, to, chunk, batch_size, device, names, ...). A class declaring
// `static constexpr bool kShadow = true;` (upstream's shadow=True) may: the field's accessor and
// setter are declared in the class, so they hide every overload of the member there
// (`c.batch_size()` is the field, as upstream's attribute is). The member stays reachable through
// the base class (`c.td::TensorClass<C>::index({0})`, returning the class) or the TensorDict
// (`c.tensordict().batch_size()`), and the field through get("name") as well. The library's own
// code calls members through TensorClass<C> or tensordict(), so it keeps working. Names the
// machinery relies on (kReservedNames: tensordict, wrap, field_names, post_init, td_...) are
// refused even then.
#pragma once

#include <array>
#include <cstddef>
#include <initializer_list>
#include <optional>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "td/tensorclass/fields.h"
#include "td/tensorclass/for_each.h"

namespace td {
namespace internal::tensorclass {

// The names of TensorClass's operations and properties: every op of td/core/ops.def and
// TensorClass's own. A field with one of them would hide the member, so TD_TENSORCLASS refuses
// it with a static_assert unless the class declares kShadow (NOTE [ Shadowing fields ] above).
inline constexpr std::string_view kMemberNames[] = {
#define TD_OP(kind, ret, name, params, args, sample) #name,
#define TD_UNARY(name, kernel) #name, #name "_",
#include "td/core/ops.def"
    "backend", "batch_dims", "batch_size", "data", "device", "ndim", "numel", "shape",
    "to_tensordict",
};
// The names the machinery of TensorClass and TD_TENSORCLASS calls on the class (and the
// post_init hook): never a field, kShadow or not. So is every name starting with "td_".
inline constexpr std::string_view kReservedNames[] = {
    "add_default", "check_fields", "check_state_keys", "check_tensordict", "check_unfrozen",
    "field_key", "field_name_list", "field_names", "finish_init", "finish_positional", "from_tensordict",
    "get_field", "has_field", "init_named", "init_positional", "load_memmap", "post_init",
    "python_type", "self", "set_field", "tensordict", "unset", "wrap", "wrap_all",
};
constexpr bool IsMemberName(std::string_view name) {
  for (std::string_view m : kMemberNames) {
    if (m == name) return true;
  }
  return false;
}
constexpr bool IsReservedName(std::string_view name) {
  for (std::string_view m : kReservedNames) {
    if (m == name) return true;
  }
  return name.substr(0, 3) == "td_";
}

// What td_for_each_field passes for each field: its declared type and, for a field with a
// default (NOTE [ Field defaults ] in td/tensorclass/fields.h), the function returning it.
template <class T, auto Default = nullptr>
struct TypeTag {
  using type = T;
  static constexpr auto kDefault = Default;
};
template <class Tag>
inline constexpr bool kHasDefault =
    !std::is_same_v<std::remove_cv_t<decltype(Tag::kDefault)>, std::nullptr_t>;

// Calls the class's post_init() hook, which may be private (TD_TENSORCLASS makes this a
// friend of the class).
struct PostInitAccess {
  template <class D>
  static auto has(int) -> decltype(std::declval<D&>().post_init(), std::true_type{});
  template <class D>
  static std::false_type has(...);
  template <class D>
  static void call(D& d) {
    if constexpr (decltype(has<D>(0))::value) d.post_init();
  }
};

}  // namespace internal::tensorclass
}  // namespace td

// Each per-field macro is called as M(Type, name, END) or M(Type, name, default, END)
// (td/tensorclass/for_each.h); TD_TC_IF_DEFAULT picks its first or second argument by that.
#define TD_TC_NAME(T, name, ...) #name,
#define TD_TC_PARAM(T, name, ...) \
  TD_TC_IF_DEFAULT(::td::internal::tensorclass::OrDefault<T>, T, __VA_ARGS__) name,
#define TD_TC_INIT(T, name, ...) \
  TD_TC_IF_DEFAULT(TD_TC_INIT_DEFAULT, TD_TC_INIT_VALUE, __VA_ARGS__)(T, name)
#define TD_TC_INIT_VALUE(T, name) \
  this->template init_positional<T>(&td_tc_items, td_key_##name(), std::move(name));
#define TD_TC_INIT_DEFAULT(T, name)                                                        \
  this->template init_positional<T>(&td_tc_items, td_key_##name(), std::move(name),        \
                                    &td_self_type::td_default_##name, std::string_view(#name));
#define TD_TC_VISIT(T, name, ...)                                                          \
  f(::td::internal::tensorclass::TypeTag<T, TD_TC_IF_DEFAULT(&td_self_type::td_default_##name, nullptr, \
                                                 __VA_ARGS__)>{},                          \
    std::string_view(#name), td_key_##name());
#define TD_TC_DEFAULT_FN(T, name, ...) \
  static T td_default_##name() { return ::td::internal::tensorclass::MakeDefault<T>(__VA_ARGS__); }
#define TD_TC_NO_DEFAULT_FN(T, name, ...)
#define TD_TC_MEMBERS(T, name, ...)                                                              \
  static_assert(::td::internal::tensorclass::FieldTraits<T>::kSupported,                                     \
                "td::TensorClass field '" #name "': unsupported field type '" #T                 \
                "'. A field is at::Tensor, td::TensorDict, a td::TensorClass, std::string, bool, " \
                "an integer or floating type, nlohmann::json, or std::optional of one of these"); \
  static_assert(!::td::internal::tensorclass::IsReservedName(#name),                                         \
                "td::TensorClass field '" #name "' has a name td::TensorClass itself relies on "  \
                "(tensordict, wrap, field_names, post_init, td_..., see kReservedNames in "       \
                "td/tensorclass/declare.h); rename the field");                              \
  static_assert(td_self_type::kShadow || !::td::internal::tensorclass::IsMemberName(#name),                   \
                "td::TensorClass field '" #name "' has the name of a TensorClass member (an "    \
                "operation such as index / reshape / sum, or batch_size, device, ...); rename "   \
                "the field, or declare `static constexpr bool kShadow = true;` before "          \
                "TD_TENSORCLASS to let the field hide the member");                              \
  static const ::td::NestedKey& td_key_##name() {                                                \
    static const ::td::NestedKey key(#name);                                                     \
    return key;                                                                                  \
  }                                                                                              \
  typename ::td::internal::tensorclass::FieldTraits<T>::Get name() const {                                   \
    return this->template get_field<T>(td_key_##name());                                         \
  }                                                                                              \
  td_self_type& set_##name(T value) {                                                            \
    this->template set_field<T>(td_key_##name(), std::move(value));                              \
    return *this;                                                                                \
  }                                                                                              \
  TD_TC_IF_DEFAULT(TD_TC_DEFAULT_FN, TD_TC_NO_DEFAULT_FN, __VA_ARGS__)(T, name, __VA_ARGS__)
