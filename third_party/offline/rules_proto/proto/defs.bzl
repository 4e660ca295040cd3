"""Offline stand-in for @rules_proto//proto:defs.bzl: re-exports Bazel's native proto rules."""

ProtoInfo = ProtoInfo

def proto_lang_toolchain(**attrs):
    native.proto_lang_toolchain(**attrs)

def proto_library(**attrs):
    native.proto_library(**attrs)
