# Wave-MLP ablation (paper Sec. 4.4, ImageNet, on Wave-MLP-T*): "No phase / Table 6 Baseline", 78.8 top-1 (paper; 15M, 2.1G).
# phase_mode='none' (mmposmlp/models/layers/patm.py PhaseEstimation). Recipe: ../wavemlp-t-dw_8xb128_in1k.py.
_base_ = ['../wavemlp-t-dw_8xb128_in1k.py']
model = dict(backbone=dict(phase_mode='none'))
