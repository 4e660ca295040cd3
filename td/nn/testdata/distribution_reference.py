#!/usr/bin/env python3
"""Reference values for td/nn/continuous_test.cc, discrete_test.cc and scale_test.cc.

Computed with torch.distributions (torch 1.13, /usr/bin/python3 on the development machine) in
double precision on the literal inputs below, which the C++ tests repeat. Run it by hand
(`/usr/bin/python3 td/nn/testdata/distribution_reference.py`) and paste what it prints into the
tests' kReference constants when an input changes. No test runs it: the build machines have no
Python torch.
"""

import torch
import torch.distributions as D
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)

LOC = torch.tensor([[0.1, -0.4, 0.7], [-1.2, 0.3, 0.05]])
SCALE = torch.tensor([[0.5, 1.3, 0.9], [0.2, 2.0, 0.75]])
VALUE = torch.tensor([[0.2, -0.5, 0.9], [-0.95, 0.1, 0.3]])     # inside (-1, 1)
VALUE_AB = torch.tensor([[1.0, -1.5, 2.5], [-1.9, 0.0, 2.9]])   # inside (-2, 3)
LOGITS = torch.tensor([[0.3, -1.0, 2.0, 0.5], [1.5, 0.2, -0.7, 0.0]])
MASK = torch.tensor([[True, False, True, True], [False, True, True, False]])
CLASSES = torch.tensor([2, 1])
MAPPING_X = torch.tensor([-3.0, -0.5, 0.0, 0.25, 2.0])


def show(name, t):
    flat = t.reshape(-1).tolist()
    print(f"// {name} {list(t.shape)}")
    print("{" + ", ".join(repr(v) for v in flat) + "},")


indep = D.Independent(D.Normal(LOC, SCALE), 1)
show("independent_normal.log_prob(VALUE)", indep.log_prob(VALUE))
show("independent_normal.entropy()", indep.entropy())

tanh = D.TransformedDistribution(D.Independent(D.Normal(LOC, SCALE), 1), [D.TanhTransform()])
show("tanh_normal.log_prob(VALUE)", tanh.log_prob(VALUE))
low, high = -2.0, 3.0
tanh_ab = D.TransformedDistribution(
    D.Independent(D.Normal(LOC, SCALE), 1),
    [D.TanhTransform(), D.AffineTransform((high + low) / 2, (high - low) / 2)])
show("tanh_normal[-2, 3].log_prob(VALUE_AB)", tanh_ab.log_prob(VALUE_AB))
tanh0 = D.TransformedDistribution(D.Normal(LOC, SCALE), [D.TanhTransform()])
show("tanh_normal(event_dims=0).log_prob(VALUE)", tanh0.log_prob(VALUE))

onehot = D.OneHotCategorical(logits=LOGITS)
show("one_hot.log_prob(one_hot(CLASSES))", onehot.log_prob(F.one_hot(CLASSES, 4).double()))
show("one_hot.entropy()", onehot.entropy())

masked = D.Categorical(logits=LOGITS.masked_fill(~MASK, float("-inf")))
show("masked.log_prob(CLASSES)", masked.log_prob(CLASSES))
show("masked.entropy()", masked.entropy())
show("masked.probs", masked.probs)

show("softplus(x + inv_softplus(1.0 - 0.01)) + 0.01", F.softplus(MAPPING_X + (torch.tensor(0.99).expm1().log())) + 0.01)
show("softplus(x + inv_softplus(2.0 - 0.1)) + 0.1", F.softplus(MAPPING_X + (torch.tensor(1.9).expm1().log())) + 0.1)
show("inv_softplus([0.5, 1, 3])", torch.tensor([0.5, 1.0, 3.0]).expm1().clamp_min(1e-6).log())
