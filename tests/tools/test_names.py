"""Short kernel names (archbench.analysis.names): readable, and never two kernels under one name."""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools"))
from archbench.analysis.names import short_name, short_names  # noqa: E402

ADD = ("void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl<at::native::CUDAFunctor_add<float>>"
       "(at::TensorIteratorBase&, at::native::CUDAFunctor_add<float> const&)::{lambda(int)#1}>(int, "
       "at::native::gpu_kernel_impl<at::native::CUDAFunctor_add<float>>(at::TensorIteratorBase&)::{lambda(int)#1})")
MUL = ("void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl<at::native::MulFunctor<float>>"
       "(at::TensorIteratorBase&)::{lambda(int)#1}>(int, at::native::gpu_kernel_impl<at::native::MulFunctor<float>>)")


class ShortNames(unittest.TestCase):
    def test_function_without_templates_parameters_or_return_type(self):
        self.assertEqual(short_name(ADD), "at::native::elementwise_kernel")
        self.assertEqual(short_name("divergent(float*, int, int)"), "divergent")
        self.assertEqual(short_name("void (anonymous namespace)::softmax_warp_forward<float, 10, false>(float*, int)"),
                         "(anonymous namespace)::softmax_warp_forward")
        self.assertEqual(short_name("cudnn::engines_precompiled::nchwToNhwcKernel(cudnn::params_t<float>, float const*)"),
                         "cudnn::engines_precompiled::nchwToNhwcKernel")
        self.assertEqual(short_name("void foo::operator()<int>(int)"), "foo::operator()")

    def test_triton_xla_and_c_names_stay(self):
        for n in ("triton_poi_fused_add_0", "loop_add_fusion", "gemm_fusion_dot_1", "kern",
                  "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_execute_kernel__5x_cublas"):
            self.assertEqual(short_name(n), n)
            self.assertEqual(short_names([n]), {n: n})

    def test_collisions_are_told_apart(self):
        div = MUL.replace("MulFunctor", "DivFunctor")
        names = short_names([ADD, MUL, div, "divergent(float*, int)"])
        self.assertEqual(names[ADD], "at::native::elementwise_kernel [CUDAFunctor_add]")
        self.assertEqual(names[MUL], "at::native::elementwise_kernel [MulFunctor]")
        self.assertEqual(names[div], "at::native::elementwise_kernel [DivFunctor]")
        self.assertEqual(names["divergent(float*, int)"], "divergent")
        self.assertEqual(len(set(names.values())), 4)

    def test_every_name_unique_even_without_a_telling_word(self):
        a = "void k<1>(int)"
        b = "void k<2>(int)"
        names = short_names([a, b, "k"])
        self.assertEqual(len(set(names.values())), 3)
        self.assertTrue(all(v.startswith("k") for v in names.values()))

    def test_operators_inside_template_arguments(self):
        # PyTorch's reduce kernels carry `sum_functor<...>::operator()(...)` among their template
        # arguments: an operator's parentheses are not brackets (on the H200 the label read ">) #1").
        a = ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<c10::BFloat16, at::native::func_wrapper_t<"
             "c10::BFloat16, at::native::sum_functor<c10::BFloat16, float>::operator()(at::TensorIterator&)::"
             "{lambda(float, float)#1}>, unsigned int> >(at::native::ReduceOp<c10::BFloat16>)")
        b = a.replace("sum_functor", "MaxNanFunctor")
        self.assertEqual(short_name(a), "at::native::reduce_kernel")
        self.assertEqual(short_names([a, b]), {a: "at::native::reduce_kernel [sum_functor]",
                                               b: "at::native::reduce_kernel [MaxNanFunctor]"})
        self.assertEqual(short_name("bool operator<(int, int)"), "operator<")

    def test_hints_prefer_template_arguments(self):
        f = "void at::native::(anonymous namespace)::adaptive_average_pool<float>(float const*, float*, int)"
        h = "void at::native::(anonymous namespace)::adaptive_average_pool<c10::BFloat16>(c10::BFloat16 const*, int)"
        self.assertEqual(short_names([f, h]), {f: "at::native::(anonymous namespace)::adaptive_average_pool [float]",
                                               h: "at::native::(anonymous namespace)::adaptive_average_pool [BFloat16]"})

    def test_hostile_input(self):
        self.assertEqual(short_name(""), "")
        self.assertIsNone(short_name(None))
        self.assertEqual(short_name("<<<>>>"), "<<<>>>")  # nothing left: the name as it was
        self.assertEqual(short_names([None, 3, "a"]), {"a": "a"})
        deep = "f" + "<" * 5000 + ">" * 5000
        self.assertEqual(short_name(deep), "f")


if __name__ == "__main__":
    unittest.main()
