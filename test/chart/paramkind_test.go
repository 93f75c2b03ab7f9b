package chart_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
)

// Why the chart's policies take no parameter object (TestNoPolicyTakesParams,
// docs/admission-policies.md). When this spec fails, the API server follows
// a ConfigMap param again after its policy was unbound and bound again
// (kubernetes/kubernetes#130887 fixed), and params could come back.
var _ = Describe("The API server's ConfigMap params (why the chart's policies take none)", func() {
	It("stay as they were when the last binding naming ConfigMaps went, after the policy is bound again", func(ctx SpecContext) {
		const ns, name = "paramkind", "paramkind-verdict"
		Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		param := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string]string{"verdict": "first"}}
		Expect(k8sClient.Create(ctx, param)).To(Succeed())
		policy := &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
				FailurePolicy: ptr.To(admissionregistrationv1.Fail),
				ParamKind:     &admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"},
				MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionregistrationv1.RuleWithOperations{
						Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
						Rule:       admissionregistrationv1.Rule{APIGroups: []string{"cache.example.com"}, APIVersions: []string{"*"}, Resources: []string{"memcacheds"}},
					},
				}}},
				Validations: []admissionregistrationv1.Validation{{Expression: "false", MessageExpression: `"the param says " + params.data.verdict`}},
			}}
		Expect(k8sClient.Create(ctx, policy)).To(Succeed())
		binding := func() *admissionregistrationv1.ValidatingAdmissionPolicyBinding {
			return &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
					PolicyName:        name,
					ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
					ParamRef: &admissionregistrationv1.ParamRef{Name: name, Namespace: ns,
						ParameterNotFoundAction: ptr.To(admissionregistrationv1.DenyAction)},
					MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
						MatchLabels: map[string]string{corev1.LabelMetadataName: ns}}},
				}}
		}
		Expect(k8sClient.Create(ctx, binding())).To(Succeed())
		DeferCleanup(func(ctx SpecContext) {
			Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, binding()))).To(Succeed())
			Expect(k8sClient.Delete(ctx, policy)).To(Succeed())
		})
		create := func() error {
			return k8sClient.Create(ctx, &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "probe"}}, client.DryRunAll)
		}
		Eventually(create).WithTimeout(verbWait).Should(MatchError(ContainSubstring("the param says first")))

		By("the param follows a change while the policy stays bound")
		Expect(k8sClient.Patch(ctx, param, client.RawPatch(types.MergePatchType, []byte(`{"data":{"verdict":"second"}}`)))).To(Succeed())
		Eventually(create).WithTimeout(verbWait).Should(MatchError(ContainSubstring("the param says second")))

		By("unbound until the API server admits, bound again, then changed: the change never arrives")
		Expect(k8sClient.Delete(ctx, binding())).To(Succeed())
		Eventually(create).WithTimeout(verbWait).Should(Succeed())
		Expect(k8sClient.Create(ctx, binding())).To(Succeed())
		Eventually(create).WithTimeout(verbWait).Should(MatchError(ContainSubstring("the param says second")))
		Expect(k8sClient.Patch(ctx, param, client.RawPatch(types.MergePatchType, []byte(`{"data":{"verdict":"third"}}`)))).To(Succeed())
		Consistently(create).WithTimeout(10*time.Second).WithPolling(time.Second).Should(MatchError(ContainSubstring("the param says second")),
			"the API server follows a ConfigMap param after a rebind again (kubernetes#130887 fixed?): params could come back")
	})
})
