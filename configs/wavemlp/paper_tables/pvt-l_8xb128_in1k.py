# PVT-large (PVT v1) on ImageNet-1k: the PVT-Large comparison row of Wave-MLP Table 2 (61M / 9.8G, 81.7 top-1,
# reported; PVT's own figures). PVT v1 = PVTPEG with a learnable position table per stage, the class token on
# stage 4 and no PEG, as our PVT-tiny/small/medium of CPVT Table 13 (../../cpvt/paper_tables/pvt-m_8xb128_in1k.py);
# the official github.com/whai362/PVT pvt_large.pth converts with tools/model_converters/pcpvt2mmposmlp.py.
# Recipe: PVT v1's own (its classification/configs/pvt/pvt_large.py: drop path 0.3, grad clipping at 1.0, the
# same as pvt_medium.py), i.e. exactly PVT-medium's config with the large arch (AdamW lr 5e-4 x 1024/512,
# wd 0.05, 300 epochs; no weight decay on the class token, the position tables decayed).
_base_ = '../../cpvt/paper_tables/pvt-m_8xb128_in1k.py'

model = dict(backbone=dict(arch='large'))
