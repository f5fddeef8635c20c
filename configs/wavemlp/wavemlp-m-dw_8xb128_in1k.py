# Wave-MLP-M with the DEPTHWISE phase estimation of T* (not an ImageNet model of the
# paper). Its detector/segmentor sizes are the ones of paper Tables 3-4 (see README). No official
# weights: pretrain with this config to get the backbone of the *_wavemlp-m-dw_* dense configs.
_base_ = './wavemlp-m_8xb128_in1k.py'

model = dict(backbone=dict(phase_mode='depthwise'))
