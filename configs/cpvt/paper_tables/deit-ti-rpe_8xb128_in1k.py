# CPVT Table 1 / Table 7 "DeiT-tiny 2D RPE (Shaw et al., 2018)": no absolute encoding, a 2-D relative
# position encoding in every block with the local range K = 8 (Sec. 5.3): 70.5 top-1 (paper; 69.8 at 384).
# Shaw et al.'s form (relative key and value embeddings, Eq. (3)-(4), shared by the heads), with
# offsets clipped to +-8 per axis over a (2K+1)^2 = 289-entry table per block; the paper gives no
# params for this row. No weight decay on the tables (as Swin's relative tables).
# Recipe: ../cpvt-ti_8xb128_in1k.py (DeiT, Table 10).
_base_ = ['../cpvt-ti_8xb128_in1k.py']
model = dict(backbone=dict(peg_positions=(), rpe_cfg=dict(mode='key_value', max_distance=8)))

optim_wrapper = dict(paramwise_cfg=dict(custom_keys={'.rpe.': dict(decay_mult=0.0)}))
