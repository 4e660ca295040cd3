// The conformance suite: the behaviour every storage backend must have, as ONE typed GoogleTest
// suite (TYPED_TEST_SUITE_P) that each backend instantiates. See NOTE [ Storage interface ] in
// td/core/storage.h for the rules the suite checks.
//
// How a backend joins
// -------------------
// 1. Write a traits type (in tests/conformance/<backend>_conformance_test.cc, or beside the
//    backend) with:
//      static constexpr const char* kBackendId;  // what TensorDict::backend() reports
//      static td::Capabilities capabilities();   // what the backend declares; must equal
//                                                // storage().capabilities() of Make()'s result
//      static td::TensorDict Make(const td::TensorDict& content);
//                                                // a NEW TensorDict on the backend holding
//                                                // exactly `content`
//    The suite calls Make with two contents, the same for every backend. ReferenceContent(),
//    which most tests use: batch size B = [4, 3, 2, 1], keys "a" float32 (*B, 5), "b" float32
//    (*B, 10), "c" int64 (*B, 3) and ("n", "inner") float32 (*B, 2) (sub-TensorDict "n" with
//    batch size B), inserted in that order. DeepContent(): levels one, two and three below the
//    root with batch dims of their own (DeepLevels()).
// 2. Instantiate the suite and add a cc_test depending on //tests/conformance:suite:
//      using MyTypes = ::testing::Types<MyTraits>;
//      INSTANTIATE_TYPED_TEST_SUITE_P(My, Conformance, MyTypes);
// 3. A test that needs a capability the backend lacks is skipped with GTEST_SKIP() naming the
//    backend and the missing capability (never silently passed): declare capabilities honestly.
//    Error paths are checked on every backend.
// Every test compares the backend's results with the same operation on the dense
// ReferenceContent(), so "conforms" means "gives the dense answer".
#pragma once

#include "tests/conformance/conformance_dict.h"
#include "tests/conformance/conformance_fixture.h"
#include "tests/conformance/conformance_non_tensor.h"
#include "tests/conformance/conformance_ops.h"
#include "tests/conformance/conformance_parity.h"

namespace td {
namespace conformance {

REGISTER_TYPED_TEST_SUITE_P(Conformance, BackendIdAndCapabilities, ContentMatchesReference,
                            ForEachEntryWalksOneLevel, GetErrorsNameKeyAndExistingKeys, SetNewKeys, SetReplacesExisting,
                            SetChecksBatchSize, SetInPlace, NestedHandleWritesThrough,
                            UpdateMergesNested, UpdateInPlaceIsAllOrNothing, DeletePopRename,
                            SelectExcludeSplitKeys, FlattenAndUnflattenKeys,
                            EmptyCloneCopyToDense, LockSemantics, LockHoldsThroughChildren,
                            BatchSizeChanges, Apply,
                            ApplyInPlace, Equality, PrintsLikeDense, StateDictAndIValue,
                            Indexing, IndexResultsWriteThrough, IndexPut, LazyPreallocation,
                            ShapeOps, StackAndCat, Math, MathInPlace, EveryInPlaceOpWritesThrough,
                            Consolidate, LeafQueries, DtypeVerbs, ParityMathAndShapeOps,
                            ParityInPlace, ParityDictVerbs, NestedLevelsWithBatchDims,
                            NonTensorKinds);

}  // namespace conformance
}  // namespace td
