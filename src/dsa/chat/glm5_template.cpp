// dsa's built-in GLM-5 chat template (prompt_format.h). The prompt format of GLM-5 / GLM-5.1:
//   [gMASK]<sop>
//   <|system|>TEXT                                  (with tools: a "# Tools" system part first,
//                                                     one JSON schema per line inside <tools>)
//   <|user|>TEXT
//   <|assistant|><think>REASONING</think>TEXT        (reasoning kept only after the last user
//                                                     turn, else just </think>; clear_thinking
//                                                     false keeps all)
//     <tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value>...</tool_call>
//   <|observation|><tool_response>RESULT</tool_response>...   (one marker per run of results)
//   <|assistant|><think>   (generation prompt; </think> when thinking is off)
// Argument values are printed as they are when strings, else as JSON.
#include "dsa/chat/prompt_format.h"

namespace dsa::chat {

const std::string& builtin_glm5_template() {
  static const std::string t = R"JINJA({#- dsa's GLM-5 template: see src/dsa/chat/glm5_template.cpp for the format. -#}
{%- macro text_of(content) -%}
    {%- if content is string -%}
        {{- content -}}
    {%- elif content is iterable and content is not mapping -%}
        {%- for part in content -%}
            {%- if part is mapping and part.type == 'text' -%}{{- part.text -}}
            {%- elif part is string -%}{{- part -}}
            {%- endif -%}
        {%- endfor -%}
    {%- elif content is not none -%}
        {{- content -}}
    {%- endif -%}
{%- endmacro -%}
[gMASK]<sop>
{%- if tools -%}
<|system|>
# Tools

You may call one or more functions to assist with the user query.

You are provided with function signatures within <tools></tools> XML tags:
<tools>
{% for tool in tools %}
{{ tool | tojson(ensure_ascii=False) }}
{% endfor %}
</tools>

For each function call, output the function name and arguments within the following XML format:
<tool_call>{function-name}<arg_key>{arg-key-1}</arg_key><arg_value>{arg-value-1}</arg_value><arg_key>{arg-key-2}</arg_key><arg_value>{arg-value-2}</arg_value>...</tool_call>
{%- endif -%}
{%- set state = namespace(last_user=-1) -%}
{%- for m in messages -%}
    {%- if m.role == 'user' -%}{%- set state.last_user = loop.index0 -%}{%- endif -%}
{%- endfor -%}
{%- set keep_all = clear_thinking is defined and not clear_thinking -%}
{%- for m in messages -%}
    {%- if m.role == 'system' -%}
        <|system|>{{ text_of(m.content) }}
    {%- elif m.role == 'user' -%}
        <|user|>{{ text_of(m.content) }}
    {%- elif m.role == 'assistant' -%}
        {%- set body = text_of(m.content) -%}
        {%- set reasoning = '' -%}
        {%- if m.reasoning_content is string -%}
            {%- set reasoning = m.reasoning_content -%}
        {%- elif '</think>' in body -%}
            {%- set reasoning = body.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') -%}
            {%- set body = body.split('</think>')[-1].lstrip('\n') -%}
        {%- endif -%}
        <|assistant|>
        {%- if reasoning and (keep_all or loop.index0 > state.last_user) -%}
            <think>{{ reasoning.strip() }}</think>
        {%- else -%}
            </think>
        {%- endif -%}
        {{- body.strip() -}}
        {%- for call in m.tool_calls or [] -%}
            {%- set f = call.function if call.function is defined else call -%}
            <tool_call>{{ f.name }}
            {%- if f.arguments is mapping -%}
                {%- for key, value in f.arguments.items() -%}
                    <arg_key>{{ key }}</arg_key><arg_value>{{ value if value is string else value | tojson(ensure_ascii=False) }}</arg_value>
                {%- endfor -%}
            {%- elif f.arguments -%}
                {{- f.arguments -}}
            {%- endif -%}
            </tool_call>
        {%- endfor -%}
    {%- elif m.role == 'tool' -%}
        {%- if loop.first or messages[loop.index0 - 1].role != 'tool' -%}<|observation|>{%- endif -%}
        <tool_response>{{ text_of(m.content) }}</tool_response>
    {%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}
    <|assistant|>{{ '</think>' if (enable_thinking is defined and not enable_thinking) else '<think>' }}
{%- endif -%}
)JINJA";
  return t;
}

}  // namespace dsa::chat
