# DeiT-Ti ablation: Table 8 "DeiT with SoftPlus" (71.6 top-1; 5.72M params, 1.26G FLOPs, reported; the table
# prints the two under swapped headers), the baseline of ./deit-ti-imlp-asoftplus_4xb256_in1k.py: DeiT-Ti
# whose MLP activation is SoftPlus instead of GeLU. mmcv registers no SoftPlus, so the MLP is
# mmposmlp.IMLP(variant='mlp') (fc1 C -> 4C, activation, fc2 4C -> C: the original MLP, Eq. 1, same
# parameters as DeiT-Ti) with act_cfg SoftPlus (torch.nn.Softplus, beta 1).
# Same as ../deit-ti-imlp_4xb256_in1k.py (DeiT's recipe) except the FFN.
_base_ = '../deit-ti-imlp_4xb256_in1k.py'

model = dict(backbone=dict(ffn_cfg=dict(_delete_=True, type='mmposmlp.IMLP', variant='mlp',
                                        act_cfg=dict(type='SoftPlus'))))
