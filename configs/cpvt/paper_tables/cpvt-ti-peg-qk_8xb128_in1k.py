# CPVT Sec. 5.1 (text, no table): the PEG "only [added] when calculating Q and K in the attention layer, so that
# only the positional information of PEG is passed through": 71.3 top-1 with DeiT-tiny (paper), against DeiT-tiny
# w/o PE 68.2 (cpvt-ti-posnone) and "the one with PEG on Q, K and V" 72.4 (= CPVT-Ti 0-1, cpvt-ti-peg0-1).
# Derived from cpvt-ti-peg0-1_8xb128_in1k.py (one depthwise 3x3 PEG at position 0, cls token, no position
# table) and its recipe (../cpvt-ti_8xb128_in1k.py, DeiT Table 10). What the paper leaves open, and our choice:
# * which block: the PEG stays at position 0 (after encoder 0) and its output X + F(X) feeds only the query and
#   key of the next attention (encoder 1); the value, the residual stream and every other block keep the
#   un-encoded tokens X (peg_target='qk');
# * the LayerNorm before qkv: encoder 1's ln1 normalises X + F(X) for q and k and X for v, so q and k are what
#   CPVT-Ti 0-1 computes there and v is what DeiT-tiny w/o PE computes (one shared ln1, one qkv Linear);
# * the cls token passes the PEG unchanged (as in every PEG), so its own query and key are un-encoded.
# Params: those of CPVT-Ti 0-1 (5,681,512); the PEG adds no parameter to the attention.
_base_ = ['./cpvt-ti-peg0-1_8xb128_in1k.py']
model = dict(backbone=dict(peg_target='qk'))
