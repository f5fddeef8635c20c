# PosMLP-T on ImageNet-1K^0.5, the protocol of the paper's ablations (Sec. 5.1/5.3, Tables 1 and 3-7):
# "all the ablation study experiments are based on the tiny version of PosMLP and conducted on the
# ImageNet1K^0.5". The paper does not say which half: we take every other image of each class (the
# class-sorted meta/train.txt, odd lines), written once with
#   awk 'NR % 2 == 1' data/imagenet/meta/train.txt > data/imagenet/meta/train_half.txt
# Recipe otherwise identical to ../posmlp-t_8xb120_in1k.py (the paper states no other change).
# This is the default row of every ablation table (GGQPE, s = (8, 16, 32, 64), 14x14 windows,
# Sigma = Gamma Gamma^T, bias b, no APE): paper 77.40 top-1 (Tables 1, 3-7).
_base_ = ['../posmlp-t_8xb120_in1k.py']

train_dataloader = dict(dataset=dict(ann_file='meta/train_half.txt'))
