// Generated preprocessor helpers of TD_TENSORCLASS (td/tensorclass/tensorclass.h): apply a
// macro to each `(Type, name)` or `(Type, name, default)` tuple of a field list (at most 32
// fields). M is called as M(Type, name, END) or M(Type, name, default, END), END being
// `::td::internal::tensorclass::DefaultEnd{}`, so that its `...` is never empty; TD_TC_IF_DEFAULT tells the
// two apart.
#pragma once

#define TD_TC_EXPAND(x) x
#define TD_TC_UNPACK(...) __VA_ARGS__
#define TD_TC_CALL(M, args) M args
#define TD_TC_APPLY(M, t) TD_TC_CALL(M, (TD_TC_UNPACK t, ::td::internal::tensorclass::DefaultEnd{}))
// `yes` when the field's `...` holds a default before END, else `no`.
#define TD_TC_PICK3_(a, b, c, ...) c
#define TD_TC_IF_DEFAULT(yes, no, ...) TD_TC_PICK3_(__VA_ARGS__, yes, no, ~)
#define TD_TC_FE_1(M, x) TD_TC_APPLY(M, x)
#define TD_TC_FE_2(M, x, ...) TD_TC_APPLY(M, x) TD_TC_EXPAND(TD_TC_FE_1(M, __VA_ARGS__))
#define TD_TC_FE_3(M, x, ...) TD_TC_APPLY(M, x) TD_TC_EXPAND(TD_TC_FE_2(M, __VA_ARGS__))
#define TD_TC_FE_4(M, x, ...) TD_TC_APPLY(M, x) TD_TC_EXPAND(TD_TC_FE_3(M, __VA_ARGS__))
#define TD_TC_FE_5(M, x, ...) TD_TC_APPLY(M, x) TD_TC_EXPAND(TD_TC_FE_4(M, __VA_ARGS__))
#define TD_TC_FE_6(M, x, ...) TD_TC_APPLY(M, x) TD_TC_EXPAND(TD_TC_FE_5(M, __VA_ARGS__))
#define TD_TC_FE_7(M, x, ...) TD_TC_APPLY(M, x) TD_TC_EXPAND(TD_TC_FE_6(M, __VA_ARGS__))
#define TD_TC_FE_8(M, x, ...) TD_TC_APPLY(M, x) TD_TC_EXPAND(TD_TC_FE_7(M, __VA_ARGS__))
#define TD_TC_FE_9(M, x, ...) TD_TC_APPLY(M, x) TD_TC_EXPAND(TD_TC_FE_8(M, __VA_ARGS__))
#define TD_TC_FE_10(M, x, ...) TD_TC_APPLY(M, x) TD_TC_EXPAND(TD_TC_FE_9(M, __VA_ARGS__))
#define TD_TC_FE_11(M, x, ...) TD_TC_APPLY(M, x) TD_TC_EXPAND(TD_TC_FE_10(M, __VA_ARGS__))
#define TD_TC_FE_12(M, x, ...) TD_TC_APPLY(M, x) TD_TC_EXPAND(TD_TC_FE_11(M, __VA_ARGS__))
#define TD_TC_FE_13(M, x, ...) TD_TC_APPLY(M, x) TD_TC_EXPAND(TD_TC_FE_12(M, __VA_ARGS__))
#define TD_TC_FE_14(M, x, ...) TD_TC_APPLY(M, x) TD_TC_EXPAND(TD_TC_FE_13(M, __VA_ARGS__))
#define TD_TC_FE_15(M, x, ...) TD_TC_APPLY(M, x) TD_TC_EXPAND(TD_TC_FE_14(M, __VA_ARGS__))
#define TD_TC_FE_16(M, x, ...) TD_TC_APPLY(M, x) TD_TC_EXPAND(TD_TC_FE_15(M, __VA_ARGS__))
#define TD_TC_FE_17(M, x, ...) TD_TC_APPLY(M, x) TD_TC_EXPAND(TD_TC_FE_16(M, __VA_ARGS__))
#define TD_TC_FE_18(M, x, ...) TD_TC_APPLY(M, x) TD_TC_EXPAND(TD_TC_FE_17(M, __VA_ARGS__))
#define TD_TC_FE_19(M, x, ...) TD_TC_APPLY(M, x) TD_TC_EXPAND(TD_TC_FE_18(M, __VA_ARGS__))
#define TD_TC_FE_20(M, x, ...) TD_TC_APPLY(M, x) TD_TC_EXPAND(TD_TC_FE_19(M, __VA_ARGS__))
#define TD_TC_FE_21(M, x, ...) TD_TC_APPLY(M, x) TD_TC_EXPAND(TD_TC_FE_20(M, __VA_ARGS__))
#define TD_TC_FE_22(M, x, ...) TD_TC_APPLY(M, x) TD_TC_EXPAND(TD_TC_FE_21(M, __VA_ARGS__))
#define TD_TC_FE_23(M, x, ...) TD_TC_APPLY(M, x) TD_TC_EXPAND(TD_TC_FE_22(M, __VA_ARGS__))
#define TD_TC_FE_24(M, x, ...) TD_TC_APPLY(M, x) TD_TC_EXPAND(TD_TC_FE_23(M, __VA_ARGS__))
#define TD_TC_FE_25(M, x, ...) TD_TC_APPLY(M, x) TD_TC_EXPAND(TD_TC_FE_24(M, __VA_ARGS__))
#define TD_TC_FE_26(M, x, ...) TD_TC_APPLY(M, x) TD_TC_EXPAND(TD_TC_FE_25(M, __VA_ARGS__))
#define TD_TC_FE_27(M, x, ...) TD_TC_APPLY(M, x) TD_TC_EXPAND(TD_TC_FE_26(M, __VA_ARGS__))
#define TD_TC_FE_28(M, x, ...) TD_TC_APPLY(M, x) TD_TC_EXPAND(TD_TC_FE_27(M, __VA_ARGS__))
#define TD_TC_FE_29(M, x, ...) TD_TC_APPLY(M, x) TD_TC_EXPAND(TD_TC_FE_28(M, __VA_ARGS__))
#define TD_TC_FE_30(M, x, ...) TD_TC_APPLY(M, x) TD_TC_EXPAND(TD_TC_FE_29(M, __VA_ARGS__))
#define TD_TC_FE_31(M, x, ...) TD_TC_APPLY(M, x) TD_TC_EXPAND(TD_TC_FE_30(M, __VA_ARGS__))
#define TD_TC_FE_32(M, x, ...) TD_TC_APPLY(M, x) TD_TC_EXPAND(TD_TC_FE_31(M, __VA_ARGS__))
#define TD_TC_PICK(_1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, _13, _14, _15, _16, _17, _18, _19, _20, _21, _22, _23, _24, _25, _26, _27, _28, _29, _30, _31, _32, NAME, ...) NAME
#define TD_TC_FOR_EACH(M, ...) \
  TD_TC_EXPAND(TD_TC_PICK(__VA_ARGS__, TD_TC_FE_32, TD_TC_FE_31, TD_TC_FE_30, TD_TC_FE_29, TD_TC_FE_28, TD_TC_FE_27, TD_TC_FE_26, TD_TC_FE_25, TD_TC_FE_24, TD_TC_FE_23, TD_TC_FE_22, TD_TC_FE_21, TD_TC_FE_20, TD_TC_FE_19, TD_TC_FE_18, TD_TC_FE_17, TD_TC_FE_16, TD_TC_FE_15, TD_TC_FE_14, TD_TC_FE_13, TD_TC_FE_12, TD_TC_FE_11, TD_TC_FE_10, TD_TC_FE_9, TD_TC_FE_8, TD_TC_FE_7, TD_TC_FE_6, TD_TC_FE_5, TD_TC_FE_4, TD_TC_FE_3, TD_TC_FE_2, TD_TC_FE_1)(M, __VA_ARGS__))
#define TD_TC_COUNT(...) TD_TC_EXPAND(TD_TC_PICK(__VA_ARGS__, 32, 31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1))
